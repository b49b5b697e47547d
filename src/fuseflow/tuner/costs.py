"""The heuristic as the tuner uses it: per-kernel features from `fusion.estimate`, a calibrated
form of its cycle formula, and Kendall's tau between estimated and simulated cycles.

`fusion.estimate` puts a kernel's cycles at its busiest node's steps, plus a share of the other
nodes' steps, plus a fixed start-up:

    cycles = B + share * (S - B) + startup,   B = max over nodes of steps,  S = their sum

with share 0.02 and start-up 20, and one step per token for every kind of node. The calibrated
form weighs each kind of node (joiners, repeaters, ALUs, reducers, scanners, arrays, writers)
and adds a cost per node (the pipeline's depth):

    cycles = B_w + share * (S_w - B_w) + startup + per_node * nodes,
    B_w = max over kinds k of w_k * (largest steps of a k node),  S_w = sum over nodes of w_k * steps

With every w_k = 1, per_node = 0 and the constants above it is the heuristic itself
(`Calibration.identity`). `fit` finds the constants that minimise the squared log error against
simulated kernels (`fuseflow tune --calibrate`, `tune.calibrate`); they are stored per hardware
configuration in `tuner/calibration/<hw>.json`.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.compile import compile_schedule
    >>> from fuseflow.fusion.estimate import CostModel
    >>> import fuseflow
    >>> p = from_mlir("tests/mlir/matmul_chain.mlir")
    >>> data = fuseflow.random_inputs(p, density=0.1, seed=0)
    >>> model = CostModel(p, data)
    >>> compiled = compile_schedule(p, "unfused", model.shapes, stats=model.stats)
    >>> kernels = kernel_costs(compiled, model.stats)
    >>> abs(sum(Calibration.identity().kernel_cycles(k) for k in kernels) - model.estimate(compiled).cycles) < 1e-6
    True
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field

import numpy as np

from ..fusion.estimate import KERNEL_STARTUP, OVERLAP_SHARE, _KernelModel, _TensorDensities
from ..ir.program import IndexOp

KINDS = ("join", "repeat", "alu", "reduce", "scan", "array", "write")
CALIBRATION_DIR = os.path.join(os.path.dirname(__file__), "calibration")


def node_kind(name: str) -> str:
    """The kind of an estimated node from its name (`join T@k`, `spacc H`, `write T values`)."""
    first = name.split(" ", 1)[0]
    return first if first in KINDS else "reduce"


@dataclass
class KernelCost:
    """What the heuristic knows of one kernel: its identity (`key`), the steps of its busiest
    node of each kind (`top`) and their sum per kind (`total`), its node count, its memory words."""

    index: int
    key: tuple
    raw: float = 0.0  # the uncalibrated heuristic's cycles
    top: dict = field(default_factory=dict)
    total: dict = field(default_factory=dict)
    nodes: int = 0
    reads: float = 0.0
    writes: float = 0.0
    reshape: bool = False
    tokens: float = 0.0  # the heuristic's token events (what a simulation's time follows)

    def features(self) -> list[float]:
        return [self.top.get(k, 0.0) for k in KINDS] + [self.total.get(k, 0.0) for k in KINDS] + [self.nodes]


def kernel_key(compiled, kernel) -> tuple:
    """What a kernel's simulation depends on besides the data: its ops, its order, the storage of
    every tensor it reads and writes, its lanes and tiles."""
    tensors = ()
    if kernel.graph is not None:  # an input re-laid out for the kernel (`W@1,0`) by the tensor it stores
        tensors = tuple(sorted((m.source or n, m.role, tuple(str(x) for x in m.levels), tuple(m.mode_order))
                               for n, m in kernel.graph.tensors.items()))
    pars = tuple(tuple(x) for x in compiled.schedule.pars.get(kernel.index, ()))
    return (tuple(kernel.group), tuple(kernel.order), tensors, pars, compiled.schedule.block)


def kernel_costs(compiled, stats) -> list[KernelCost]:
    """Each kernel's `KernelCost` (as `fusion.estimate.CostModel.estimate` walks them: an earlier
    kernel's estimated output densities feed the later ones)."""
    densities = _TensorDensities(stats)
    out = []
    for kernel in compiled.kernels:
        key = kernel_key(compiled, kernel)
        if kernel.region is None or kernel.table is None:
            op = compiled.program.producer(kernel.group[0])
            if op is not None and not isinstance(op, IndexOp) and op.input in densities.written:
                densities.written[op.output] = {}
            out.append(KernelCost(kernel.index, key, reshape=True))
            continue
        model = _KernelModel(kernel, densities, compiled.schedule.pars.get(kernel.index, []))
        est = model.estimate()
        cost = KernelCost(kernel.index, key, est.cycles, nodes=len(model.node_steps), reads=est.reads,
                          writes=est.writes, tokens=est.tokens)
        for steps, name in model.node_steps:
            kind = node_kind(name)
            cost.top[kind] = max(cost.top.get(kind, 0.0), steps)
            cost.total[kind] = cost.total.get(kind, 0.0) + steps
        out.append(cost)
    return out


@dataclass
class Calibration:
    """The constants of the calibrated cycle formula (see the module), with where they came from."""

    weights: dict = field(default_factory=lambda: {k: 1.0 for k in KINDS})
    share: float = OVERLAP_SHARE
    startup: float = KERNEL_STARTUP
    per_node: float = 0.0
    hw: str = "default"
    fitted: dict = field(default_factory=dict)  # what the fit was run on and how well it ranks

    @staticmethod
    def identity(hw: str = "default") -> "Calibration":
        """The uncalibrated heuristic (`fusion.estimate`'s constants)."""
        return Calibration(hw=hw)

    @property
    def is_identity(self) -> bool:
        return not self.fitted

    def kernel_cycles(self, k: KernelCost) -> float:
        if k.reshape:
            return 0.0
        w = self.weights
        top = max((w.get(kind, 1.0) * v for kind, v in k.top.items()), default=0.0)
        total = sum(w.get(kind, 1.0) * v for kind, v in k.total.items())
        return top + self.share * (total - top) + self.startup + self.per_node * k.nodes

    def cycles(self, kernels: list[KernelCost]) -> float:
        return sum(self.kernel_cycles(k) for k in kernels)

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(data: dict) -> "Calibration":
        c = Calibration()
        c.weights = {k: float(data.get("weights", {}).get(k, 1.0)) for k in KINDS}
        c.share, c.startup = float(data.get("share", OVERLAP_SHARE)), float(data.get("startup", KERNEL_STARTUP))
        c.per_node, c.hw, c.fitted = float(data.get("per_node", 0.0)), data.get("hw", "default"), \
            data.get("fitted", {})
        return c


def hw_key(hw) -> str:
    """The name of a hardware configuration's calibration file: `default` for `HwConfig()`,
    `hbm` for `HwConfig(hbm=True)`, else a short digest of its settings."""
    from ..sim.hw import HwConfig  # noqa: PLC0415

    hw = hw or HwConfig()
    if hw == HwConfig():
        return "default"
    if hw == HwConfig(hbm=True):
        return "hbm"
    import hashlib  # noqa: PLC0415

    return "hw-" + hashlib.sha256(repr(hw).encode()).hexdigest()[:10]


def calibration_path(key: str) -> str:
    return os.path.join(CALIBRATION_DIR, f"{key}.json")


def load_calibration(hw=None) -> Calibration:
    """The stored calibration of this hardware configuration, else the uncalibrated heuristic."""
    key = hw_key(hw)
    path = calibration_path(key)
    if not os.path.isfile(path):
        return Calibration.identity(key)
    with open(path) as handle:
        return Calibration.from_json(json.load(handle))


def save_calibration(calibration: Calibration, path: str | None = None) -> str:
    path = path or calibration_path(calibration.hw)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temp = path + ".tmp"
    with open(temp, "w") as handle:
        json.dump(calibration.to_json(), handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(temp, path)
    return path


# -- fitting -------------------------------------------------------------------------------------
_BOUNDS = {"weight": (0.05, 20.0), "share": (0.0, 1.0), "startup": (0.0, 5000.0), "per_node": (0.0, 200.0)}


def _unpack(theta) -> Calibration:
    c = Calibration()
    c.weights = {k: float(v) for k, v in zip(KINDS, theta[:len(KINDS)])}
    c.share, c.startup, c.per_node = (float(x) for x in theta[len(KINDS):])
    return c


KERNEL_WEIGHT = 0.3  # the kernels' absolute log error beside the candidates' relative one


def fit(cases: list[list[tuple[list[KernelCost], list[int]]]], hw: str = "default") -> Calibration:
    """The constants that rank each case's candidates best and estimate kernels closely:
    least squares (soft L1) over, per case, each candidate's log error of estimated against
    simulated total cycles *less the case's mean log error* (ranking within a case is blind to
    a common factor), each case weighing as much as any other, and, weighed `KERNEL_WEIGHT` in
    all, every kernel's log error (reshapes and empty kernels left out); within bounds that keep
    every weight positive. `cases`: per case, (the kernels' costs, their simulated cycles) per
    candidate."""
    from scipy.optimize import least_squares  # noqa: PLC0415 - scipy is slow to import

    groups = [[(costs, cycles) for costs, cycles in rows if sum(cycles) > 0 and len(costs) == len(cycles)]
              for rows in cases]
    groups = [g for g in groups if g]
    kernels = [(k, c) for g in groups for costs, cycles in g for k, c in zip(costs, cycles) if not k.reshape and c > 0]
    if not kernels:
        return Calibration.identity(hw)
    each = np.log(np.array([c for _, c in kernels], dtype=float))
    totals = [np.log(np.array([sum(c) for _, c in g], dtype=float)) for g in groups]
    kernel_scale = math.sqrt(KERNEL_WEIGHT * len(groups) / len(kernels))

    def relative(c: Calibration) -> list:
        out = []
        for g, sim in zip(groups, totals):
            r = np.log(np.maximum(1.0, [c.cycles(costs) for costs, _ in g])) - sim
            out.append((r - r.mean()) / math.sqrt(len(g)))
        return out

    def absolute(c: Calibration):
        return np.log(np.maximum(1.0, [c.kernel_cycles(k) for k, _ in kernels])) - each

    def residuals(theta):
        c = _unpack(theta)
        return np.concatenate(relative(c) + [kernel_scale * absolute(c)])

    start = Calibration.identity()
    x0 = [start.weights[k] for k in KINDS] + [start.share, start.startup, start.per_node]
    lower = [_BOUNDS["weight"][0]] * len(KINDS) + [_BOUNDS[n][0] for n in ("share", "startup", "per_node")]
    upper = [_BOUNDS["weight"][1]] * len(KINDS) + [_BOUNDS[n][1] for n in ("share", "startup", "per_node")]
    best = least_squares(residuals, x0, bounds=(lower, upper), loss="soft_l1", f_scale=0.1, max_nfev=3000)
    calibration = _unpack(best.x)
    calibration.hw = hw

    def rms(c: Calibration) -> dict:
        rel = np.concatenate([r * math.sqrt(len(g)) for r, g in zip(relative(c), groups)])
        return {"candidates_relative": round(float(np.sqrt(np.mean(rel ** 2))), 4),
                "kernels": round(float(np.sqrt(np.mean(absolute(c) ** 2))), 4)}

    calibration.fitted = {"training_cases": len(groups), "candidates": sum(len(g) for g in groups),
                          "kernels": len(kernels), "rms_log_error_before": rms(start),
                          "rms_log_error_after": rms(calibration)}
    return calibration


def kendall_tau(estimated, simulated) -> float | None:
    """Kendall's tau-b between two sequences (None for fewer than 3 pairs or no variation)."""
    from scipy.stats import kendalltau  # noqa: PLC0415

    if len(estimated) < 3 or len(set(simulated)) < 2 or len(set(estimated)) < 2:
        return None
    tau = kendalltau(estimated, simulated).statistic
    return None if tau is None or math.isnan(tau) else float(tau)
