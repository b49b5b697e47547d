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

import math
from collections import Counter

from .context import SimRow
from .costs import Calibration, KernelCost


class Surrogate:
    """Simulated kernels by key, the ratios of simulated to estimated, and each kernel's 95%
    half-width where it was sampled (see the module)."""

    def __init__(self, cal: Calibration):
        self.cal = cal
        self.kernel_sim: dict[tuple, tuple[int, int]] = {}  # kernel key -> simulated (cycles, words)
        self.kernel_half: dict[tuple, float] = {}  # kernel key -> its 95% half-width (0: simulated whole)
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
        """Remember each kernel of a simulated candidate (a failed row: nothing); a sampled
        kernel's estimate replaces an earlier one only when its interval is narrower."""
        if not row.ok or costs is None or len(row.kernel_cycles) != len(costs):
            return
        words = row.kernel_words if len(row.kernel_words) == len(costs) else [0] * len(costs)
        sampled = row.sampled and len(row.kernel_low) == len(costs) == len(row.kernel_high)
        lows, highs = (row.kernel_low, row.kernel_high) if sampled else (row.kernel_cycles, row.kernel_cycles)
        for k, cycles, w, low, high in zip(costs, row.kernel_cycles, words, lows, highs):
            half = float(max(cycles - low, high - cycles))  # the wider side: intervals may be widened on one
            if k.reshape or self.kernel_half.get(k.key, math.inf) <= half:
                continue
            first = k.key not in self.kernel_sim
            self.kernel_sim[k.key], self.kernel_half[k.key] = (cycles, w), half
            est = self.cal.kernel_cycles(k)
            if first and est > 0 and cycles > 0:
                self.ratios.append(cycles / est)
            if first and k.reads + k.writes > 0 and w > 0:
                self.word_ratios.append(w / (k.reads + k.writes))

    def difference(self, a: list[KernelCost], b: list[KernelCost]) -> tuple[float, float] | None:
        """Candidate a's cycles less b's, with the 95% half-width of that difference, from the
        kernels known (None unless every kernel of both is). Paired by kernel: a kernel both
        contain counts with one estimate in both and cancels; the others' half-widths add in
        quadrature (independent samples; a kernel twice in one candidate, its error twice).

            >>> from fuseflow.tuner.costs import Calibration, KernelCost
            >>> s = Surrogate(Calibration.identity())
            >>> s.kernel_sim = {("x",): (1000, 0), ("y",): (500, 0), ("z",): (480, 0)}
            >>> s.kernel_half = {("x",): 100.0, ("y",): 30.0, ("z",): 40.0}
            >>> x, y, z = (KernelCost(0, (name,)) for name in "xyz")
            >>> s.difference([x, z], [x, y])  # x cancels: 480 - 500, half-width sqrt(30^2 + 40^2)
            (-20.0, 50.0)
        """
        ka, kb = (Counter(k.key for k in c if not k.reshape) for c in (a, b))
        common = ka & kb
        only_a, only_b = ka - common, kb - common
        if any(key not in self.kernel_sim for key in (ka | kb)):
            return None
        d = sum(n * self.kernel_sim[key][0] for key, n in only_a.items()) - \
            sum(n * self.kernel_sim[key][0] for key, n in only_b.items())
        var = sum((n * self.kernel_half[key]) ** 2 for part in (only_a, only_b) for key, n in part.items())
        return float(d), math.sqrt(var)
