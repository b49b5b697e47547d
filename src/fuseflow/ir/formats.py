"""Per-level storage formats of tensors.

A format is a tuple of level formats (outermost level first), the mode order
(which tensor dimension each level stores) and an optional block shape (the
levels then index blocks; every block is a dense tile).

    >>> f = TensorFormat.parse("dense,compressed")
    >>> f.levels[1].is_compressed, f.levels[0].has_locate, str(f)
    (True, True, 'dense,compressed')
    >>> str(TensorFormat.parse("compressed,compressed;order=1,0;block=16x16"))
    'compressed,compressed;order=1,0;block=16x16'
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError


@dataclass(frozen=True)
class LevelFormat:
    """How one level stores its coordinates; code asks capabilities, not names."""

    name: str
    has_locate: bool  # can find coordinate c of a fiber in O(1) without scanning
    is_compressed: bool  # stores only the nonzero coordinates (segment + crd arrays)

    def __str__(self) -> str:
        return self.name

    def __deepcopy__(self, memo):  # level formats are shared constants
        return self


DENSE = LevelFormat("dense", has_locate=True, is_compressed=False)
COMPRESSED = LevelFormat("compressed", has_locate=False, is_compressed=True)
LEVEL_FORMATS = {"dense": DENSE, "d": DENSE, "compressed": COMPRESSED, "c": COMPRESSED}


@dataclass(frozen=True)
class TensorFormat:
    """How a tensor is stored: one level format per stored dimension (outermost first), the
    mode order (which dimension each level stores) and an optional dense block shape."""

    levels: tuple[LevelFormat, ...]
    mode_order: tuple[int, ...]
    block: tuple[int, ...] | None = None

    @staticmethod
    def dense(rank: int) -> "TensorFormat":
        return TensorFormat((DENSE,) * rank, tuple(range(rank)))

    @staticmethod
    def all_compressed(rank: int) -> "TensorFormat":
        return TensorFormat((COMPRESSED,) * rank, tuple(range(rank)))

    @property
    def rank(self) -> int:
        return len(self.levels)

    @property
    def is_dense(self) -> bool:
        return not any(level.is_compressed for level in self.levels)

    def level_of_mode(self, mode: int) -> int:
        return self.mode_order.index(mode)

    def constant_levels_dense(self, dims) -> "TensorFormat":
        """The same data stored with the levels of `dims` (unit dimensions, read at the constant
        index 0) dense. A compressed unit level stores its one coordinate only under some
        positions of the levels above, so it filters them: the nearest level above of another
        dimension takes that filtering (becomes compressed), else the nearest below. The stored
        values are the same; readers index those dimensions with 0 without scanning their levels.

            >>> csr = TensorFormat.parse("dense,compressed")
            >>> str(csr.constant_levels_dense({1})), str(csr.constant_levels_dense({0}))
            ('compressed,dense', 'dense,compressed')
            >>> str(TensorFormat.parse("dense,compressed;order=1,0").constant_levels_dense({0}))
            'compressed,dense;order=1,0'
        """
        unit = [d in dims for d in self.mode_order]
        if not any(u and level.is_compressed for u, level in zip(unit, self.levels)):
            return self
        levels = [DENSE if u else level for u, level in zip(unit, self.levels)]
        for k, level in enumerate(self.levels):
            if unit[k] and level.is_compressed:
                above = [j for j in range(k - 1, -1, -1) if not unit[j]]
                below = [j for j in range(k + 1, self.rank) if not unit[j]]
                if above or below:
                    levels[(above or below)[0]] = COMPRESSED
        return TensorFormat(tuple(levels), self.mode_order, self.block)

    def dims_last(self, dims) -> "TensorFormat":
        """The levels of `dims` (dense: see `constant_levels_dense`) moved innermost, in the
        order of the dimensions; where a unit dimension's dense level sits changes no position.

            >>> str(TensorFormat.parse("dense,compressed;order=1,0").dims_last({1}))
            'compressed,dense'
            >>> str(TensorFormat.parse("dense,dense;order=1,0").dims_last({0, 1}))
            'dense,dense'
        """
        pairs = list(zip(self.mode_order, self.levels))
        assert all(not level.is_compressed for d, level in pairs if d in dims), "unit levels are dense"
        moved = [p for p in pairs if p[0] not in dims] + sorted(p for p in pairs if p[0] in dims)
        return TensorFormat(tuple(lv for _, lv in moved), tuple(d for d, _ in moved), self.block)

    def __str__(self) -> str:
        text = ",".join(str(level) for level in self.levels)
        if self.mode_order != tuple(range(self.rank)):
            text += ";order=" + ",".join(map(str, self.mode_order))
        if self.block:
            text += ";block=" + "x".join(map(str, self.block))
        return text

    @staticmethod
    def of(stored) -> "TensorFormat":
        """The format a record with level names `levels`, `mode_order` and `block` (a graph's
        `sam.graph.GraphTensor`) describes.

            >>> from types import SimpleNamespace
            >>> str(TensorFormat.of(SimpleNamespace(levels=("dense", "compressed"), mode_order=(1, 0), block=None)))
            'dense,compressed;order=1,0'
        """
        return TensorFormat(tuple(LEVEL_FORMATS[x] for x in stored.levels), tuple(stored.mode_order),
                            tuple(stored.block) if stored.block else None)

    @staticmethod
    def parse(text: str, rank: int | None = None, where: str | None = None) -> "TensorFormat":
        """Parse `levels[;order=..][;block=BxB]`; levels are dense|compressed (or d|c)."""
        parts = [p.strip() for p in text.split(";") if p.strip()]
        if not parts:
            raise UserError(f"empty format {text!r}", where, "write e.g. 'dense,compressed'")
        levels = []
        for name in parts[0].split(","):
            name = name.strip().lower()
            if name not in LEVEL_FORMATS:
                raise UserError(f"unknown level format {name!r} in {text!r}", where,
                                "use dense or compressed for each level")
            levels.append(LEVEL_FORMATS[name])
        order = tuple(range(len(levels)))
        block = None
        for part in parts[1:]:
            key, _, value = part.partition("=")
            try:
                if key.strip() == "order":
                    order = tuple(int(v) for v in value.split(","))
                elif key.strip() == "block":
                    block = tuple(int(v) for v in value.lower().split("x"))
                else:
                    raise ValueError
            except ValueError:
                raise UserError(f"cannot read {part!r} in format {text!r}", where,
                                "use order=1,0 or block=16x16") from None
        fmt = TensorFormat(tuple(levels), order, block)
        fmt.check(rank, where)
        return fmt

    def check(self, rank: int | None, where: str | None = None) -> None:
        if sorted(self.mode_order) != list(range(self.rank)):
            raise UserError(f"mode order {self.mode_order} is not a permutation of 0..{self.rank - 1}", where)
        if rank is not None and self.rank != rank:
            raise UserError(f"format {self} has {self.rank} levels but the tensor has {rank} dimensions",
                            where, f"give {rank} level formats")
        if self.block is not None and len(self.block) != self.rank:
            raise UserError(f"block shape {self.block} does not match rank {self.rank}", where)
