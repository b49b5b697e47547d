"""The tuner's surrogate: what a candidate costs as far as the search knows it.

A candidate's cost is the sum over its kernels of the simulated cycles (or memory words) of
that very kernel where an earlier simulation ran it (same ops, order, storage of every tensor it
reads and writes, lanes, tiles: `costs.kernel_key`; kernels run one after another, each from
memory, so a kernel's cycles do not depend on the rest of the schedule), else the calibrated
estimate scaled by the median ratio of simulated to estimated kernels so far.

    >>> from fuseflow.tuner.costs import Calibration, KernelCost
    >>> from fuseflow.tuner.context import SimRow
    >>> s = Surrogate(Calibration.identity())
    >>> a, b = (KernelCost(i, (name,), top={"alu": 80.0}, total={"alu": 80.0}) for i, name in enumerate("ab"))
    >>> s.learn([a], SimRow("x", cycles=200, verified=True, kernel_cycles=[200], kernel_words=[0]))
    >>> s.cost([a]), s.scale(), s.cost([b])  # a as simulated; b estimated (100) scaled by a's 200 / 100
    (200.0, 2.0, 200.0)
"""
from __future__ import annotations

from .context import SimRow
from .costs import Calibration, KernelCost


class Surrogate:
    """Simulated kernels by key, and the ratios of simulated to estimated (see the module)."""

    def __init__(self, cal: Calibration):
        self.cal = cal
        self.kernel_sim: dict[tuple, tuple[int, int]] = {}  # kernel key -> simulated (cycles, words)
        self.ratios: list[float] = []  # simulated / calibrated estimate of simulated kernels
        self.word_ratios: list[float] = []

    def scale(self, what: str = "cycles") -> float:
        """The median ratio of simulated to estimated kernels so far (1 before any)."""
        ratios = self.ratios if what == "cycles" else self.word_ratios
        return float(sorted(ratios)[len(ratios) // 2]) if ratios else 1.0

    def cost(self, costs: list[KernelCost], what: str = "cycles") -> float:
        """A candidate's cycles (`what` "cycles") or memory words ("words") as far as known."""
        scale = self.scale(what)
        total = 0.0
        for k in costs:
            known = self.kernel_sim.get(k.key)
            if known is not None:
                total += known[0] if what == "cycles" else known[1]
            elif what == "cycles":
                total += scale * self.cal.kernel_cycles(k)
            else:
                total += scale * (k.reads + k.writes)
        return total

    def learn(self, costs: list[KernelCost] | None, row: SimRow) -> None:
        """Remember each kernel of a simulated candidate (a failed row: nothing)."""
        if not row.ok or costs is None or len(row.kernel_cycles) != len(costs):
            return
        words = row.kernel_words if len(row.kernel_words) == len(costs) else [0] * len(costs)
        for k, cycles, w in zip(costs, row.kernel_cycles, words):
            if k.reshape or k.key in self.kernel_sim:
                continue
            self.kernel_sim[k.key] = (cycles, w)
            est = self.cal.kernel_cycles(k)
            if est > 0 and cycles > 0:
                self.ratios.append(cycles / est)
            if k.reads + k.writes > 0 and w > 0:
                self.word_ratios.append(w / (k.reads + k.writes))
