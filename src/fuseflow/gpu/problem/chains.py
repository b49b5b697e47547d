"""Operator chains GEMM -> elementwise -> GEMM and their loop extents.

A chain computes ``E[M,L] = act(A[M,K] @ B[K,N]) @ D[N,L]``; a gated chain computes
``E = (silu(A @ B0) * (A @ B1)) @ D``; a conv chain is lowered by implicit im2col.

    >>> conv_chain("c", ic=64, hw=56, oc1=256, oc2=64, k1=1).dims
    (3136, 256, 64, 64)
    >>> Chain("x", "ffn", 49, 64, 32, 16).padded
    (64, 64, 32, 16)
"""
from __future__ import annotations

from dataclasses import dataclass

from fuseflow.errors import UserError

DIMS = ("M", "N", "K", "L")
KINDS = ("ffn", "gated", "conv")
ACTS = ("relu", "gelu", "silu")
STRATEGIES = ("auto", "sequential", "spatial")
ATOM = 16  # MMA atom: tiles are multiples of 16 and extents are padded to it


@dataclass(frozen=True)
class Chain:
    """A two-GEMM chain with extents M, N, K, L (N is GEMM1's reduction dim). Gated chains always
    apply SiLU to the gate branch, whatever ``act`` says."""

    name: str
    kind: str
    M: int
    N: int
    K: int
    L: int
    act: str = "relu"
    strategy: str = "auto"  # gated only: sequential, spatial, or auto (search both)
    note: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise UserError(f"chain kind {self.kind!r} is not one of {', '.join(KINDS)}", f"chain {self.name}")
        for d in DIMS:
            v = getattr(self, d)
            if not isinstance(v, int) or v <= 0:
                raise UserError(f"extent {d}={v!r} must be a positive integer", f"chain {self.name}")
        if self.act not in ACTS:
            raise UserError(f"activation {self.act!r} is not one of {', '.join(ACTS)}", f"chain {self.name}")
        if self.strategy not in STRATEGIES:
            raise UserError(f"strategy {self.strategy!r} is not one of {', '.join(STRATEGIES)}",
                            f"chain {self.name}")
        if self.kind != "gated" and self.strategy != "auto":
            raise UserError("a strategy applies to gated chains only", f"chain {self.name}")
        if self.kind == "gated" and self.act != "silu":
            object.__setattr__(self, "act", "silu")

    @property
    def gated(self) -> bool:
        return self.kind == "gated"

    @property
    def dims(self) -> tuple[int, int, int, int]:
        return (self.M, self.N, self.K, self.L)

    @property
    def padded(self) -> tuple[int, int, int, int]:
        """Extents rounded up to the 16-wide MMA atom (out-of-range rows are masked, never moved)."""
        return tuple(-(-v // ATOM) * ATOM for v in self.dims)

    @property
    def strategies(self) -> tuple[str, ...]:
        """Strategies the search tries: ('standard',) or the gated ones."""
        if not self.gated:
            return ("standard",)
        return ("sequential", "spatial") if self.strategy == "auto" else (self.strategy,)

    def flops(self) -> int:
        """Multiply-adds x 2 of both GEMMs (the gated GEMM0 runs twice)."""
        return 2 * self.M * self.N * self.K * (2 if self.gated else 1) + 2 * self.M * self.N * self.L

    def describe(self) -> str:
        extra = f" {self.act}" + (f" {self.strategy}" if self.gated else "")
        return f"{self.name}: {self.kind} M={self.M} N={self.N} K={self.K} L={self.L}{extra}"

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "M": self.M, "N": self.N, "K": self.K, "L": self.L,
                "act": self.act, "strategy": self.strategy, "note": self.note}


def conv_chain(name: str, ic: int, hw: int, oc1: int, oc2: int, k1: int = 1, batch: int = 1,
               note: str = "") -> Chain:
    """conv(k1 x k1, IC->OC1, 'same' padding) -> ReLU -> conv 1x1 (OC1->OC2) as a GEMM chain:
    M = batch*H*W, N = OC1, K = IC*k1^2, L = OC2."""
    for label, v in (("IC", ic), ("H=W", hw), ("OC1", oc1), ("OC2", oc2), ("k1", k1), ("batch", batch)):
        if not isinstance(v, int) or v <= 0:
            raise UserError(f"conv parameter {label}={v!r} must be a positive integer", f"chain {name}")
    return Chain(name, "conv", batch * hw * hw, oc1, ic * k1 * k1, oc2, act="relu", note=note)
