"""Kernels and runners of the writers: level_write (a level's seg and crd) and value_write (the
values). Mirrors `sim.oracle.write`. What they write grows in arrays of their own (the output
tensor); the kernels ask for more room with GROW.

    >>> from fuseflow.sim.fast import apply
    >>> run = apply("level_write", {"crd": "0 2 S0 1 S0 S1 D"}, {"tensor": "T"})
    >>> level = run.written_level
    >>> level.seg.tolist(), level.crd.tolist(), run.counters["mem_writes"]
    ([0, 2, 3], [0, 2, 1], 5)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..storage import Level
from . import core, pool, tiles
from .core import NeedOracle, Runner
from .stream import DONE as D_TOK
from .stream import EMPTY, STOP, VAL

_NC, _NS, _COUNT = core.FREE, core.FREE + 1, core.FREE + 2  # crd entries, seg entries, elements of the open fiber


class LevelBuffers(NamedTuple):
    """level_write's state record: the crd and seg buffers written (GROW asks for larger ones),
    the level's format, its dimension if known, and the memory model (`Runner.mem`)."""
    crd: np.ndarray
    seg: np.ndarray
    compressed: bool
    has_dim: bool
    dim: int
    mem: np.ndarray


@njit(cache=True)
def _k_level_write(nd, inp, lv):
    S = nd.S
    ik, idat, isent, icons, pi, ei, fi, lat = core.inlet(nd, inp)
    crd, seg, compressed, has_dim, dim, mem = lv
    t, ii, steps, status = core.resumed(S)
    nc = S[_NC]
    ns = S[_NS]
    count = S[_COUNT]
    writes = S[core.WRITES]
    hbm = mem[0] != 0
    while True:
        status = core.missing(pi, ei, fi)
        if status:
            break
        if nc >= crd.shape[0] or ns >= seg.shape[0]:
            status = core.GROW
            break
        k = ik[pi]
        tn = max(t + ii, max(isent[pi] + lat, 0))
        if k == VAL:
            x = idat[pi]
            if compressed:
                if (has_dim and not (0 <= x and x < dim)) or (count > 0 and x <= crd[nc - 1]):
                    status = core.FAIL
                    break
                crd[nc] = x
                nc += 1
                writes += 1
                if hbm:
                    tn += core.stall(mem, writes - 1, 1, False)
            elif x != count:
                status = core.FAIL
                break
            count += 1
        elif k == STOP and idat[pi] == 0:
            if compressed:
                seg[ns] = nc
                ns += 1
                writes += 1
                if hbm:
                    tn += core.stall(mem, writes - 1, 1, False)
            elif count != dim:
                status = core.FAIL
                break
            count = 0
        elif k == STOP or k == D_TOK:
            if count > 0:
                status = core.FAIL
                break
        else:
            status = core.FAIL
            break
        t = tn
        pi, steps, status = core.stepped(icons, pi, t, steps, k == D_TOK)
        if status:
            break
    core.settle(S, t, steps)
    S[_NC] = nc
    S[_NS] = ns
    S[_COUNT] = count
    S[core.WRITES] = writes
    core.closed(nd, inp, pi)
    return status


class ValueBuffer(NamedTuple):
    """value_write's state record: the values buffer written (GROW asks for a larger one), the
    memory model (`Runner.mem`) and the words a value takes."""
    vals: np.ndarray
    mem: np.ndarray
    width: int


@njit(cache=True)
def _k_value_write(nd, inp, buf):
    S = nd.S
    ik, idat, isent, icons, pi, ei, fi, lat = core.inlet(nd, inp)
    vals, mem, w = buf
    t, ii, steps, status = core.resumed(S)
    nv = S[_NC]
    words = S[core.WORDS]
    hbm = mem[0] != 0
    while status == 0:
        status = core.missing(pi, ei, fi)
        if status:
            break
        if nv >= vals.shape[0]:
            status = core.GROW
            S[core.NEED] = 0
            break
        k = ik[pi]
        tn = max(t + ii, max(isent[pi] + lat, 0))
        if k == VAL or k == EMPTY:
            vals[nv] = float(idat[pi]) if k == VAL else 0.0
            nv += 1
            words += w
            if hbm:
                tn += core.stall(mem, words - w, w, False)
        elif not (k == STOP or k == D_TOK):
            status = core.FAIL
            break
        t = tn
        pi, steps, status = core.stepped(icons, pi, t, steps, k == D_TOK)
    core.settle(S, t, steps)
    S[_NC] = nv
    S[core.WORDS] = words
    S[core.WRITES] = words
    core.closed(nd, inp, pi)
    return status


def _trimmed(arr: np.ndarray, n: int) -> np.ndarray:
    """`arr` cut to its first n items in place (realloc shrinks without copying or touching new
    pages); nothing else refers to a writer's buffer once its run is over."""
    arr.resize(int(n), refcheck=False)
    return arr


class LevelWrite(Runner):
    kernel = staticmethod(_k_level_write)
    backpressure = True  # no outputs
    ins = ("crd",)

    def check(self):
        fmt, dim = self.params.get("format", "compressed"), self.params.get("dim")
        self.compressed = fmt == "compressed"
        if not self.compressed and (fmt != "dense" or dim is None):
            raise NeedOracle()
        if dim is not None and not isinstance(dim, (int, np.integer)):
            raise NeedOracle()
        self.dim = dim
        self.crd = pool.take(1024, np.int64)
        self.seg = pool.take(1024, np.int64)
        self.seg[0] = 0
        self.left = None
        self.S[_NS] = 1

    def check_bound(self):
        if self.in_ch[0].dtype != np.int64:
            raise NeedOracle()

    def state(self):
        return LevelBuffers(self.crd, self.seg, self.compressed, self.dim is not None,
                            0 if self.dim is None else int(self.dim), self.mem())

    def grow(self):
        if self.S[_NC] >= self.crd.shape[0]:
            self.crd = self.engine.enlarge(self.crd, self)
        if self.S[_NS] >= self.seg.shape[0]:
            self.seg = self.engine.enlarge(self.seg, self)
        self.invalidate()

    def finish(self):
        """The level written (once: its buffers become the level's arrays, then the cached level)."""
        if self.left is None:
            if not self.compressed:
                self.left = {"level": Level("dense", self.dim)}
            else:
                self.left = {"level": Level("compressed", self.dim, _trimmed(self.seg, self.S[_NS]),
                                            _trimmed(self.crd, self.S[_NC]))}
            self.seg = self.crd = None
        return self.left


class ValueWrite(Runner):
    kernel = staticmethod(_k_value_write)
    backpressure = True  # no outputs
    ins = ("val",)

    def check(self):
        self.width = self.tile.out_elements if self.tile is not None else 1
        self.vals = pool.take(1024, np.float64)
        self.tiles: list = []
        self.left = None

    def state(self):
        return ValueBuffer(self.vals, self.mem(), self.width)

    def grow(self):
        self.vals = self.engine.enlarge(self.vals, self)
        self.invalidate()

    def after(self, before_in, before_out):
        if self.tile is not None:
            tiles.written(self, before_in)

    def finish(self):
        """The values written (once: the buffer becomes them, then the cached values)."""
        if self.left is None:
            if self.tile is not None:
                self.left = {"vals": tiles.stacked(self)}
                pool.give(self.vals)
            else:
                self.left = {"vals": _trimmed(self.vals, self.S[_NC])}
            self.vals = None
        return self.left
