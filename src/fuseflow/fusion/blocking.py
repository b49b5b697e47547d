"""Blocked execution (`block=B`): which dimensions are tiled, block shapes, blocked formats, and
the `Tiling` the lowering counts tiles with.

A dimension (and the variable that indexes it) is tiled when its extent is a multiple of B; the
others stay scalar (block size 1). Tiling by extent keeps every tensor's blocking the same in
every group, so intermediates written blocked by one kernel read back blocked in the next.

    >>> b = Blocking(16, {"Q": (64, 8), "M": (64, 64)})
    >>> b.block["Q"], b.grid["Q"], b.grid["M"]
    ((16, 1), (4, 8), (4, 4))
    >>> str(b.format("M", TensorFormat.parse("compressed,compressed")))
    'compressed,compressed;block=16x16'
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import UserError
from ..ir.formats import TensorFormat
from ..sam.graph import GraphTensor
from .region import Region


@dataclass(frozen=True)
class Tiling:
    """Blocked lowering: `tiled` variables are counted in blocks of `b`."""

    b: int
    tiled: frozenset

    def axes(self, indices) -> tuple:
        return tuple(v for v in indices if isinstance(v, str) and v in self.tiled)

    def param(self, ins, out) -> dict:
        """The `tile` parameter of a value node (every value of a blocked region is a tile, of
        no axes if it depends on no tiled variable); none when nothing is tiled."""
        if not self.tiled:
            return {}
        return {"tile": {"b": self.b, "in": [list(a) for a in ins], "out": list(out)}}


def union_axes(*axes) -> tuple:
    """The tile axes of several values, in first-seen order."""
    return tuple(dict.fromkeys(x for a in axes for x in a))


class Blocking:
    """Block shapes (`block`) and block grids (`grid`) of every tensor for block size `b`."""

    def __init__(self, b: int, shapes: dict):
        if not isinstance(b, int) or isinstance(b, bool) or b < 1:
            raise UserError(f"block={b!r}: the block size must be a positive integer", "schedule item block",
                            "write e.g. block=32")
        self.b = b
        self.shapes = {n: tuple(int(x) for x in s) for n, s in shapes.items()}
        self.block = {n: tuple(b if x % b == 0 else 1 for x in s) for n, s in self.shapes.items()}
        self.grid = {n: tuple(x // k for x, k in zip(s, self.block[n])) for n, s in self.shapes.items()}
        if not any(k > 1 or b == 1 for bl in self.block.values() for k in bl):
            raise UserError(f"block={b} divides no dimension of the program", "schedule item block",
                            "choose a block size that divides some tensor dimension (e.g. 16, 32, 64)")

    def format(self, name: str, fmt: TensorFormat) -> TensorFormat:
        """`fmt` with the tensor's block shape (a declared block must be that shape)."""
        want = self.block[name]
        if fmt.block is not None and tuple(fmt.block) != want:
            raise UserError(f"format of {name} declares block={'x'.join(map(str, fmt.block))}, but block={self.b} "
                            f"tiles it as {'x'.join(map(str, want))}", f"format.{name}",
                            "drop the block from the format or change the schedule's block")
        if not self.is_blocked(name):
            return TensorFormat(fmt.levels, fmt.mode_order)
        return TensorFormat(fmt.levels, fmt.mode_order, want)

    def tiling(self, region: Region) -> Tiling:
        """The region's tiled variables (those indexing a tiled dimension)."""
        tiled = set()
        for inst in region.instances:
            accesses = [(inst.access(k), a.tensor) for k, a in enumerate(inst.op.inputs)]
            for indices, tensor in accesses + [(inst.out_indices, inst.tensor)]:
                for v, k in zip(indices, self.block[tensor]):
                    if isinstance(v, str) and (k > 1 or self.b == 1):
                        tiled.add(v)
        return Tiling(self.b, frozenset(tiled))

    def full_metadata(self, meta: GraphTensor, name: str) -> GraphTensor:
        """A graph tensor with the full shape and the block shape (the graph's levels count
        blocks)."""
        source = meta.stores(name)
        block = tuple(self.block[source]) if self.is_blocked(source) else meta.block
        return replace(meta, shape=tuple(self.shapes[source]), block=block)

    def is_blocked(self, name: str) -> bool:
        return self.b == 1 or any(k > 1 for k in self.block[name])


def check_format_blocks(name: str, fmt: TensorFormat, shape) -> None:
    """A blocked format must tile its tensor exactly."""
    if fmt.block and any(k < 1 or s % k for s, k in zip(shape, fmt.block)):
        raise UserError(f"format of {name} has block={'x'.join(map(str, fmt.block))}, which does not divide "
                        f"its shape {tuple(shape)}", f"format.{name}", "use block sizes that divide each dimension")
