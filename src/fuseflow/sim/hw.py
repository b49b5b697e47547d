"""Hardware parameters of the cycle model: every timing constant of the simulators lives here.

A node's step `s` happens at `t_s = max(t_{s-1} + II, visible times of the tokens it reads)`; a
token emitted at step time `t` is visible to its consumer at `t + latency`. Scalar nodes take
`latency[kind]` and `interval.get(kind, initiation_interval)`. Nodes whose values are tiles (see
`sim.tiles`) take the block-mode cost of their tile class instead (`tile_costs`), written as
`a*E + b*B + c` with E the elements of the node's largest tile and B the block size:

| class | latency | II | source |
|---|---|---|---|
| matmul (an ALU that contracts) | 2B-1 | B | reference, true block mode: Mul = tile matmul |
| alu (elementwise) | E (B² for BxB) | 1 | reference, true block mode: Add/Sub/ElemMul |
| reduce (reduce, spacc, spacc2) | E (B² for BxB) | 1 | reference: reduce emits at +N² |
| array (tile read) | E (B²) | 1 | reference, timing-only block mode: array latency B² |
| write (tile value write) | 1 | 1 | assumption: the reference gives none (writers emit nothing) |

    >>> hw = HwConfig(latency={"scan": 3})
    >>> hw.latency_of("scan"), hw.latency_of("alu"), hw.initiation_interval
    (3, 1, 1)
    >>> hw.tile_timing("matmul", elements=32 * 32, block=32), hw.tile_timing("alu", elements=256, block=16)
    ((63, 32), (256, 1))
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..sam.primitives import PRIMITIVES
from .tiles import tile_class

DEFAULT_LATENCY = 1  # cycles from a step to the visibility of its outputs
MEMORY_KINDS = ("scan", "array", "level_write", "value_write")  # nodes that touch memory
DEFAULT_INITIATION_INTERVAL = 1  # minimum cycles between two steps of one node


def _default_latencies() -> dict[str, int]:
    return {kind: DEFAULT_LATENCY for kind in PRIMITIVES}


@dataclass(frozen=True)
class TileCost:
    """Latency and initiation interval of a tile class, each as (a, b, c) in a*E + b*B + c."""

    latency: tuple[int, int, int]
    interval: tuple[int, int, int]


def _default_tile_costs() -> dict[str, TileCost]:
    return {
        "matmul": TileCost((0, 2, -1), (0, 1, 0)),
        "alu": TileCost((1, 0, 0), (0, 0, 1)),
        "reduce": TileCost((1, 0, 0), (0, 0, 1)),
        "array": TileCost((1, 0, 0), (0, 0, 1)),
        "write": TileCost((0, 0, 1), (0, 0, 1)),
    }


@dataclass
class HwConfig:
    latency: dict[str, int] = field(default_factory=_default_latencies)
    initiation_interval: int = DEFAULT_INITIATION_INTERVAL
    interval: dict[str, int] = field(default_factory=dict)  # per-kind II overriding the global one
    tile_costs: dict[str, TileCost] = field(default_factory=_default_tile_costs)  # block mode
    channel_depth: int | None = None  # tokens a channel holds; None = unbounded (see sim.bounded)
    # memory model (off by default, as in the reference's figure runs): every word a scanner,
    # array or writer reads or writes goes to one of `hbm_channels` channels round-robin; a node
    # issues its words in batches of `hbm_channels` and stalls for each batch: `hbm_startup` once,
    # then `hbm_latency + (words per channel - 1) * hbm_interval` per batch
    hbm: bool = False
    hbm_channels: int = 8
    hbm_latency: int = 2
    hbm_interval: int = 2
    hbm_startup: int = 14
    word_bytes: int = 4

    def memory_stall(self, words_before: int, words: int) -> int:
        """Extra cycles of a step that issues `words` memory words after `words_before` earlier ones."""
        if not self.hbm or words == 0:
            return 0
        batches = (words_before + words) // self.hbm_channels - words_before // self.hbm_channels
        stall = batches * self.hbm_latency
        return stall + (self.hbm_startup if words_before == 0 else 0)

    def final_stall(self, words: int) -> int:
        """Cycles for the last, partial batch of a node that issued `words` words in all."""
        if not self.hbm or words % self.hbm_channels == 0:
            return 0
        return self.hbm_latency

    def latency_of(self, kind: str) -> int:
        """Latency of a primitive kind (kinds missing from `latency` get the default)."""
        return self.latency.get(kind, DEFAULT_LATENCY)

    def interval_of(self, kind: str) -> int:
        """Initiation interval of a scalar node of `kind`."""
        return self.interval.get(kind, self.initiation_interval)

    def tile_timing(self, tile_class: str, elements: int, block: int) -> tuple[int, int]:
        """(latency, II) of a node of a tile class handling tiles of `elements` elements."""
        cost = self.tile_costs[tile_class]
        a, b, c = cost.latency
        ia, ib, ic = cost.interval
        return a * elements + b * block + c, ia * elements + ib * block + ic

    def timing(self, kind: str, params: dict | None = None) -> tuple[int, int]:
        """(latency, II) of a node: its tile class's block-mode cost when its values are tiles."""
        spec = tile_class(kind, params or {})
        if spec is None:
            return self.latency_of(kind), self.interval_of(kind)
        return self.tile_timing(*spec)
