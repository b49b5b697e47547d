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
DEFAULT_INITIATION_INTERVAL = 1  # minimum cycles between two steps of one node


def _default_latencies() -> dict[str, int]:
    return {kind: DEFAULT_LATENCY for kind in PRIMITIVES}


@dataclass
class HwConfig:
    latency: dict[str, int] = field(default_factory=_default_latencies)
    initiation_interval: int = DEFAULT_INITIATION_INTERVAL

    def latency_of(self, kind: str) -> int:
        """Latency of a primitive kind (kinds missing from `latency` get the default)."""
        return self.latency.get(kind, DEFAULT_LATENCY)
