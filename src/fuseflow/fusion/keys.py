"""The keys the lowering files its streams under: per leaf its current reference stream
(`LeafRef`), per instance its values (`Values`, or `BufferedValues` for a buffered read), and the
"boxes" of coordinates per instance and variable (`Iteration`, `Output`); `Coord` is a coordinate
stream with the keys of the payloads aligned with it.

    >>> Iteration(0, "i") == Iteration(0, "i"), Output(0, "i") == Iteration(0, "i")
    (True, False)
"""
from __future__ import annotations

from dataclasses import dataclass

from ..sam.graph import Stream


@dataclass(frozen=True)
class LeafRef:
    """The reference stream of leaf `leaf` at the level scanned last."""

    leaf: int


@dataclass(frozen=True)
class Values:
    """The value stream of instance `inst`."""

    inst: int


@dataclass(frozen=True)
class BufferedValues:
    """The values of `producer` as the buffered read of `reader` iterates them again."""

    producer: int
    reader: int


@dataclass(frozen=True)
class UniverseRef:
    """The reference stream of the dense universe scan `node`."""

    node: int


@dataclass(frozen=True)
class Iteration:
    """Box of instance `inst`'s own coordinates at `var`."""

    inst: int
    var: str


@dataclass(frozen=True)
class Output:
    """Box of the coordinates at `var` that consumers see for finished `inst`'s values (an
    accumulator's output, or its own iteration)."""

    inst: int
    var: str


@dataclass(frozen=True)
class Coord:
    """A coordinate stream with the keys of the payload streams aligned with it."""

    crd: Stream
    keys: tuple
    universe: bool  # every fiber holds every coordinate of the variable
