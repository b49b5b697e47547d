"""Hardware parameters of the cycle model: every timing constant of the simulators lives here.

A node's step `s` happens at `t_s = max(t_{s-1} + initiation_interval, visible times of the
tokens it reads)`; a token emitted at step time `t` is visible to its consumer at
`t + latency[kind]`.

    >>> hw = HwConfig(latency={"scan": 3})
    >>> hw.latency_of("scan"), hw.latency_of("alu"), hw.initiation_interval
    (3, 1, 1)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..sam.primitives import PRIMITIVES

DEFAULT_LATENCY = 1  # cycles from a step to the visibility of its outputs
MEMORY_KINDS = ("scan", "array", "level_write", "value_write")  # nodes that touch memory
DEFAULT_INITIATION_INTERVAL = 1  # minimum cycles between two steps of one node


def _default_latencies() -> dict[str, int]:
    return {kind: DEFAULT_LATENCY for kind in PRIMITIVES}


@dataclass
class HwConfig:
    latency: dict[str, int] = field(default_factory=_default_latencies)
    initiation_interval: int = DEFAULT_INITIATION_INTERVAL
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
