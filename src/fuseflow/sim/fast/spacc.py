"""The sparse accumulators spacc (order 1, `spacc_order1`) and spacc2 (order 2, `spacc_order2`):
what their runners share. Mirrors `sim.oracle.spacc`.

The live state is one outer fiber's worth of entries; at an outer `S0` the entries drain in
coordinate order. With tiles, a kernel logs what it accumulated and drained (`tiles.accumulate`
replays the log on the tiles, as the oracle combines them, in stream order per key).

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> run = apply("spacc", {"crd_outer": "0 1 S0 D", "crd_inner": "0 2 S0 2 S0 S1 D",
    ...                       "val": "1 2 S0 3 S0 S1 D"})
    >>> format_tokens(run.outs["crd"]), format_tokens(run.outs["val"])
    ('0 2 S0 D', '1 5 S0 D')
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import tiles
from .core import NeedOracle
from .reduce import Reducer


class Accumulator(Reducer):
    """What spacc and spacc2 share: the event log for tiles, growing state."""

    def check_bound(self):
        if any(ch.dtype != np.int64 for ch in self.in_ch[:-1]):
            raise NeedOracle()

    def _log(self, nev_slot: int):
        self.logging = self.tile is not None
        self.nev_slot = nev_slot  # state slot of the event count
        self.ev = np.empty((4, 1024 if self.logging else 0), dtype=np.int64)

    def after(self, before_in, before_out):
        if self.logging:
            tiles.accumulate(self, before_out)


@njit(cache=True)
def log_event(ev, nev, key1, key2, pos, what):
    """Log event `nev` for the tiles' replay: key (key1, key2) (order 1: key1 is 0) accumulated
    the value at input position `pos` (`what` ACC) or was emitted at output position `pos`
    (`EMIT`). Returns the next event's index."""
    ev[0, nev] = key1
    ev[1, nev] = key2
    ev[2, nev] = pos
    ev[3, nev] = what
    return nev + 1
