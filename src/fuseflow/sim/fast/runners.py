"""The runner of every primitive (`RUNNERS`: kind -> a factory of `core.Runner`s), by family, and
the runners whose `after` only moves tile values (`TILES_ONLY_AFTER`: on scalar streams a visit
skips it).

    >>> sorted(RUNNERS) == sorted(__import__("fuseflow.sim.oracle", fromlist=["IMPLS"]).IMPLS)
    True
"""
from __future__ import annotations

from .alu import Alu
from .drop import CrdDrop
from .join import Joiner
from .lanes import Copy, Join
from .read import Array, Locate, Root, Scan
from .reduce import Reduce
from .repeat import Repeat, Repsig
from .spacc_order1 import Spacc
from .spacc_order2 import Spacc2
from .write import LevelWrite, ValueWrite


def _intersect(*args):
    return Joiner(*args, is_union=False)


def _union(*args):
    return Joiner(*args, is_union=True)


RUNNERS = {
    "root": Root, "scan": Scan, "locate": Locate, "repsig": Repsig, "repeat": Repeat,
    "intersect": _intersect, "union": _union, "array": Array, "alu": Alu, "reduce": Reduce,
    "spacc": Spacc, "spacc2": Spacc2, "crd_drop": CrdDrop, "level_write": LevelWrite,
    "value_write": ValueWrite, "broadcast": Copy, "fork": Copy, "join": Join,
}

# `after` of these handles tiles and nothing else (Joiner gathers payloads, the accumulators replay logs)
TILES_ONLY_AFTER = (Alu, Copy, Join, Reduce, Repeat, Array, ValueWrite)
