"""Tile values: the arithmetic of value streams whose elements are dense BxB (or B, or BxBxB) tiles.

A value node of a blocked graph has a `tile` parameter `{"b": B, "in": [axes per input], "out":
axes}`: every axis is a variable name, and a value's tile has one length-B axis per name. ALU
ops broadcast their operands over named axes (einsum style); a `mul` whose output lacks an axis
of its operands contracts it (the tile matmul, e.g. `ik,kj->ij`). Reducers first reduce the
axes of their input that their output lacks inside each tile (e.g. max over jj gives a vector
over ii), then combine tiles across blocks. Every function works on *stacks* (a leading axis of
n tiles), so the oracle (stacks of one) and the fast engine (stacks of a whole stream) compute
with the same numpy calls and get the same bits.

Counters count tile elements, so blocked and scalar runs compare: an elementwise tile op is E
FLOPs (E elements of its output), a contraction 2·B^u - B^o for u axes of its operands and o of
its output (a BxB matmul is 2B³ - B²: its sums of B products need B - 1 adds each; the last add
is the reducer's), a reducer E FLOPs per input tile, and an array read or value write E words.

    >>> spec = TileSpec.of("alu", {"tile": {"b": 2, "in": [["i", "k"], ["k", "j"]], "out": ["i", "j"]}})
    >>> a, b = np.arange(4.0).reshape(1, 2, 2), np.ones((1, 2, 2))
    >>> spec.alu("mul", [a, b])[0].tolist(), spec.is_contraction, spec.flops_per_token
    ([[1.0, 1.0], [5.0, 5.0]], True, 12)
    >>> r = TileSpec.of("reduce", {"kind": "max", "tile": {"b": 2, "in": [["i", "j"]], "out": ["i"]}})
    >>> r.inner(np.array([[[1.0, 3.0], [4.0, 2.0]]]), "max").tolist()
    [[3.0, 4.0]]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..sam.graph import GraphError
from ..scalar_ops import OPS, REDUCTIONS

REDUCE_KINDS = ("reduce", "spacc", "spacc2")


class Tile:
    """A tile on a value stream: tokens compare by identity, never by their arrays."""

    __slots__ = ("a",)

    def __init__(self, a: np.ndarray):
        self.a = a

    def __repr__(self) -> str:
        return "tile(" + "x".join(map(str, self.a.shape)) + ")"


@dataclass(frozen=True)
class TileSpec:
    """The tile axes of one node: `ins` per input port (in port order), `out` of its output."""

    b: int
    ins: tuple[tuple[str, ...], ...]
    out: tuple[str, ...]

    @staticmethod
    def of(kind: str, params: dict) -> "TileSpec | None":
        raw = params.get("tile")
        if not raw:
            return None
        try:
            b = int(raw["b"])
            spec = TileSpec(b, tuple(tuple(x) for x in raw.get("in", [])), tuple(raw.get("out", [])))
        except (KeyError, TypeError, ValueError):
            raise GraphError(f"{kind}: bad tile parameter {raw!r}") from None
        if b < 1:
            raise GraphError(f"{kind}: tile block size {b} is not positive")
        return spec

    def shape(self, axes) -> tuple[int, ...]:
        return (self.b,) * len(axes)

    @property
    def out_elements(self) -> int:
        return self.b ** len(self.out)

    @property
    def in_elements(self) -> int:
        return self.b ** len(self.ins[0]) if self.ins else self.out_elements

    @property
    def union(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(x for axes in self.ins for x in axes))

    @property
    def is_contraction(self) -> bool:
        return any(x not in self.out for x in self.union)

    @property
    def flops_per_token(self) -> int:
        """FLOPs of one ALU result: a contraction multiplies B^u pairs (u = axes of both operands)
        and adds them into B^o sums (2B³ - B² for a BxB matmul, so that with the B² adds that
        accumulate it across blocks a product costs 2 FLOPs per multiply as in scalar runs);
        an elementwise op is one per element."""
        if self.is_contraction:
            return 2 * self.b ** len(self.union) - self.out_elements
        return self.out_elements

    # -- arrays ------------------------------------------------------------------------------
    def read(self, stored: np.ndarray) -> np.ndarray:
        """A stack of stored tiles (block shapes, unit dimensions included) over the output axes."""
        ins = self.ins[0] if self.ins else self.out
        if sorted(ins) != sorted(self.out):
            raise GraphError(f"an array cannot read tile axes {ins} as {self.out}")
        tiles = stored.reshape((stored.shape[0],) + self.shape(ins))
        return np.ascontiguousarray(np.transpose(tiles, (0,) + tuple(1 + ins.index(x) for x in self.out)))

    def full(self, n: int, value: float, axes=None) -> np.ndarray:
        return np.full((n,) + self.shape(self.out if axes is None else axes), value, dtype=np.float64)

    def expand(self, stack: np.ndarray, axes) -> np.ndarray:
        """A stack over `axes` broadcast to the output axes (which must hold them all)."""
        axes = tuple(axes)
        order = sorted(range(len(axes)), key=lambda d: self.out.index(axes[d]))
        moved = np.transpose(stack, (0,) + tuple(d + 1 for d in order))
        present = {axes[d] for d in order}
        view = moved.reshape((stack.shape[0],) + tuple(self.b if x in present else 1 for x in self.out))
        return np.broadcast_to(view, (stack.shape[0],) + self.shape(self.out))

    def alu(self, op: str, operands: list, scalar: float | None = None, pos: int = 1) -> np.ndarray:
        """Apply `op` to stacks of operand tiles (one stack per input; an operand given as a float
        stands for a scalar input)."""
        axes = list(self.ins)
        stacks = list(operands)
        n = stacks[0].shape[0]
        if scalar is not None:
            stacks.insert(pos, np.full(n, scalar, dtype=np.float64))
            axes.insert(pos, ())
        if op == "mul" and len(stacks) == 2 and self.is_contraction:
            return self.contract(stacks[0], axes[0], stacks[1], axes[1])
        for ax in axes:
            if any(x not in self.out for x in ax):
                raise GraphError(f"tile op {op} cannot drop an axis of {ax} (only mul contracts)")
        xs = [self.expand(s, ax) for s, ax in zip(stacks, axes)]
        row = OPS.get(op)
        if row is None or row.numpy is None or row.arity != len(xs):
            raise GraphError(f"no tile version of ALU op {op} with {len(xs)} operands")
        with np.errstate(all="ignore"):
            got = row.numpy(*xs)
        return got.astype(np.float64) if row.family == "compare" else np.ascontiguousarray(got)

    def contract(self, a: np.ndarray, a_axes, b: np.ndarray, b_axes) -> np.ndarray:
        """The tile matmul: sum over the axes of both operands that the output lacks, as one
        batched np.matmul (the same BLAS call per tile however many tiles are stacked)."""
        a_axes, b_axes = tuple(a_axes), tuple(b_axes)
        batch = [x for x in self.out if x in a_axes and x in b_axes]
        fa = [x for x in a_axes if x not in b_axes]
        fb = [x for x in b_axes if x not in a_axes]
        red = [x for x in a_axes if x in b_axes and x not in self.out]
        if any(x not in self.out for x in fa + fb):
            raise GraphError(f"tile contraction {a_axes},{b_axes}->{self.out} reduces an axis of one operand")
        n, bsz = a.shape[0], self.b
        nb, na, nf, nr = bsz ** len(batch), bsz ** len(fa), bsz ** len(fb), bsz ** len(red)
        ta = np.transpose(a, (0,) + tuple(1 + a_axes.index(x) for x in batch + fa + red))
        tb = np.transpose(b, (0,) + tuple(1 + b_axes.index(x) for x in batch + red + fb))
        ma = np.ascontiguousarray(ta).reshape(n, nb, na, nr)
        mb = np.ascontiguousarray(tb).reshape(n, nb, nr, nf)
        got = np.matmul(ma, mb).reshape((n,) + self.shape(batch + fa + fb))
        names = batch + fa + fb
        return np.ascontiguousarray(np.transpose(got, (0,) + tuple(1 + names.index(x) for x in self.out)))

    def inner(self, stack: np.ndarray, kind: str) -> np.ndarray:
        """Reduce the input axes the output lacks inside each tile, then order axes as the output."""
        ins = self.ins[0] if self.ins else self.out
        if any(x not in ins for x in self.out):
            raise GraphError(f"a reduction from tile axes {ins} cannot make {self.out}")
        drop = tuple(1 + d for d, x in enumerate(ins) if x not in self.out)
        kept = [x for x in ins if x in self.out]
        red = REDUCTIONS[kind].numpy.reduce(stack, axis=drop) if drop else stack
        return np.ascontiguousarray(np.transpose(red, (0,) + tuple(1 + kept.index(x) for x in self.out)))

    def combine(self, kind: str, acc: np.ndarray, tile: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return REDUCTIONS[kind].numpy(acc, tile)

    def identity(self, kind: str) -> np.ndarray:
        return np.full(self.shape(self.out), REDUCTIONS[kind].identity, dtype=np.float64)


def tile_class(kind: str, params: dict):
    """(class, elements, block) of a tile-valued node for its timing (see HwConfig), else None."""
    spec = TileSpec.of(kind, params)
    if spec is None:
        return None
    if kind == "alu":
        if params.get("op") == "mul" and spec.is_contraction:
            return "matmul", spec.b ** len(spec.union), spec.b
        return "alu", max([spec.out_elements] + [spec.b ** len(a) for a in spec.ins]), spec.b
    if kind in REDUCE_KINDS:
        return "reduce", max(spec.in_elements, spec.out_elements), spec.b
    if kind == "array":
        return "array", spec.out_elements, spec.b
    if kind == "value_write":
        return "write", spec.out_elements, spec.b
    return None


def stored_tile(tensor, index: int, spec: TileSpec) -> np.ndarray:
    """Tile `index` of a stored tensor (its axes `spec.ins[0]`, in dimension order) over the
    spec's output axes (the same names, maybe transposed)."""
    return spec.read(np.asarray(tensor.vals[index], dtype=np.float64)[None])[0]
