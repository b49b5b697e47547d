"""Records of kernels measured on a GPU, their JSON form, and the tables written from them.

    >>> t = Timing.from_samples_ms([0.02] * 20, warmup=5)
    >>> p = PlanMeasurement("X", 1, "[N] M,L,K sta cls 2x1x1x1", 15.0, t, 1e-3, True, {}, 2, 1.0, "")
    >>> c = ChainMeasurement("X", (128, 256, 64, 64), 1e9, [p], Timing.from_samples_ms([0.03] * 20, 5), None, 30.0,
    ...                      "global")
    >>> round(c.speedup_over_torch(), 2), ChainMeasurement.from_json(c.to_json()) == c
    (1.5, True)
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from .timing_stats import Timing

TOLERANCE = {"fp16": 1e-2, "bf16": 5e-2}   # max |E - E_fp32| / max |E_fp32| for a kernel to count as correct


@dataclass(frozen=True)
class PlanMeasurement:
    """One plan of a chain's top K, run on the GPU (``error`` says why not, when it did not run)."""

    chain: str
    rank: int                # place in the planner's ranking (1 = the planner's choice)
    plan: str
    predicted_us: float
    timing: Timing | None
    max_error: float         # max |E - E_fp32| / max |E_fp32|
    within_tolerance: bool
    volumes: dict            # modelled bytes per level
    cluster_size: int
    occupancy: float
    error: str = ""
    phase_share: dict = field(default_factory=dict)   # rank 1: share of cluster time per kernel phase

    @property
    def ok(self) -> bool:
        return self.timing is not None and self.within_tolerance and not self.error

    def to_json(self) -> dict:
        data = asdict(self)
        data["timing"] = self.timing.to_json() if self.timing else None
        return data

    @classmethod
    def from_json(cls, data: dict) -> "PlanMeasurement":
        return cls(**{**data, "timing": Timing.from_json(data["timing"])})


@dataclass(frozen=True)
class ChainMeasurement:
    """A chain's measured plans beside PyTorch (cuBLAS GEMM, activation, GEMM) and torch.compile."""

    chain: str
    dims: tuple
    flops: float
    plans: list
    torch_unfused: Timing | None
    torch_compiled: Timing | None
    predicted_unfused_us: float
    bottleneck: str                  # the model's bottleneck for the planner's choice
    dtype: str = "fp16"
    notes: list = field(default_factory=list)

    @property
    def fused(self) -> PlanMeasurement | None:
        """The planner's choice (rank 1), if it was measured."""
        return next((p for p in self.plans if p.rank == 1), None)

    def speedup_over_torch(self) -> float:
        f = self.fused
        if f is None or not f.ok or self.torch_unfused is None:
            return math.nan
        return self.torch_unfused.median_us / f.timing.median_us

    def speedup_over_compiled(self) -> float:
        f = self.fused
        if f is None or not f.ok or self.torch_compiled is None:
            return math.nan
        return self.torch_compiled.median_us / f.timing.median_us

    def to_json(self) -> dict:
        return {"chain": self.chain, "dims": list(self.dims), "flops": self.flops,
                "plans": [p.to_json() for p in self.plans],
                "torch_unfused": self.torch_unfused.to_json() if self.torch_unfused else None,
                "torch_compiled": self.torch_compiled.to_json() if self.torch_compiled else None,
                "predicted_unfused_us": self.predicted_unfused_us, "bottleneck": self.bottleneck,
                "dtype": self.dtype, "notes": list(self.notes)}

    @classmethod
    def from_json(cls, data: dict) -> "ChainMeasurement":
        return cls(data["chain"], tuple(data["dims"]), data["flops"],
                   [PlanMeasurement.from_json(p) for p in data["plans"]], Timing.from_json(data["torch_unfused"]),
                   Timing.from_json(data["torch_compiled"]), data["predicted_unfused_us"], data["bottleneck"],
                   data.get("dtype", "fp16"), list(data.get("notes", [])))

    def with_compiled(self, timing: Timing | None, note: str = "") -> "ChainMeasurement":
        notes = self.notes + ([note] if note else [])
        return ChainMeasurement(self.chain, self.dims, self.flops, self.plans, self.torch_unfused, timing,
                                self.predicted_unfused_us, self.bottleneck, self.dtype, notes)


def _us(t: Timing | None) -> str:
    return f"{t.median_us:.1f}" if t else "–"


def _x(v: float) -> str:
    return "–" if math.isnan(v) else f"{v:.2f}"


def format_measured_table(rows: list[ChainMeasurement]) -> str:
    """Markdown: measured fused kernel vs PyTorch and torch.compile, with the model's prediction."""
    lines = ["| chain | M,N,K,L | plan (rank 1) | fused us | fused TFLOP/s | max err | PyTorch us | torch.compile us "
             "| speedup vs PyTorch | vs torch.compile | predicted fused us | predicted speedup | model bound |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        f = r.fused
        plan = f.plan if f else "–"
        fused = _us(f.timing) if f and f.ok else (f"fails: {f.error or 'outside tolerance'}" if f else "–")
        tflops = f"{f.timing.tflops(r.flops):.1f}" if f and f.ok else "–"
        err = f"{f.max_error:.1e}" if f and f.timing else "–"
        pred = f"{f.predicted_us:.1f}" if f else "–"
        pred_sp = _x(r.predicted_unfused_us / f.predicted_us) if f else "–"
        lines.append(f"| {r.chain} | {','.join(map(str, r.dims))} | {plan} | {fused} | {tflops} | {err} | "
                     f"{_us(r.torch_unfused)} | {_us(r.torch_compiled)} | {_x(r.speedup_over_torch())} | "
                     f"{_x(r.speedup_over_compiled())} | {pred} | {pred_sp} | {r.bottleneck} |")
    return "\n".join(lines)


def geomean(values) -> float:
    values = [v for v in values if not math.isnan(v) and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def summary_lines(rows: list[ChainMeasurement]) -> list[str]:
    """Counts of correct chains, geometric-mean speedups, and the memory-bound chains' speedups."""
    ok = [r for r in rows if r.fused and r.fused.ok]
    memory_bound = [r for r in ok if r.bottleneck != "compute"]
    fast = [r for r in memory_bound if r.speedup_over_torch() >= 1.3]
    return [f"chains whose fused kernel ran within tolerance: {len(ok)} of {len(rows)}",
            f"geometric-mean speedup over PyTorch unfused: {_x(geomean(r.speedup_over_torch() for r in ok))}x; "
            f"over torch.compile: {_x(geomean(r.speedup_over_compiled() for r in ok))}x",
            f"memory-bound chains (model) at >= 1.3x over PyTorch: {len(fast)} of {len(memory_bound)}"]


def phase_lines(rows: list[ChainMeasurement]) -> list[str]:
    """Where each fused kernel spends its time (share of cluster time per phase), for the chains the
    model calls memory-bound that do not reach 1.3x over PyTorch."""
    out = []
    for r in rows:
        f = r.fused
        if f and f.ok and f.phase_share and r.bottleneck != "compute" and not r.speedup_over_torch() >= 1.3:
            shares = ", ".join(f"{k} {100 * v:.0f}%" for k, v in f.phase_share.items())
            out.append(f"{r.chain} ({_x(r.speedup_over_torch())}x): {shares}")
    return out
