"""Fast-engine kernels and drivers of the writers: level_write (a level's seg and crd) and
value_write (the values).

    >>> from fuseflow.sim.fast import apply
    >>> run = apply("level_write", {"crd": "0 2 S0 1 S0 S1 D"}, {"tensor": "T"})
    >>> level = run.written_level
    >>> level.seg.tolist(), level.crd.tolist(), run.counters["mem_writes"]
    ([0, 2, 3], [0, 2, 1], 5)
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import fast_tiles
from .fast_core import _check, _counters, _ints, _NeedOracle, _Node, _Res, _stall
from .fast_stream import DONE, EMPTY, STOP, VAL
from .storage import Level


@njit(cache=True)
def _k_level_write(kind, data, xs, xl, compressed, has_dim, dim, mem, ii):
    n = kind.shape[0]
    crd = np.empty(n, dtype=np.int64)
    seg = np.empty(n + 1, dtype=np.int64)
    seg[0] = 0
    nc = 0
    ns = 1
    count = 0
    writes = 0
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    err = 0
    while True:
        if j >= n:
            err = 1
            break
        k = kind[j]
        t = max(t + ii, max(xs[j] + xl, 0))
        if k == VAL:
            x = data[j]
            if compressed:
                if (has_dim and not (0 <= x and x < dim)) or (count > 0 and x <= crd[nc - 1]):
                    err = 2
                    break
                crd[nc] = x
                nc += 1
                writes += 1
                if mem[0]:
                    t += _stall(mem, writes - 1, 1, False)
            elif x != count:
                err = 2
                break
            count += 1
        elif k == STOP and data[j] == 0:
            if compressed:
                seg[ns] = nc
                ns += 1
                writes += 1
                if mem[0]:
                    t += _stall(mem, writes - 1, 1, False)
            elif count != dim:
                err = 2
                break
            count = 0
        elif k == STOP or k == DONE:
            if count > 0:
                err = 2
                break
        else:
            err = 3
            break
        cons[j] = t
        j += 1
        if k == DONE:
            break
    return err, j, t, writes, seg[:ns], crd[:nc], cons


@njit(cache=True)
def _k_value_write(kind, data, xs, xl, mem, w, ii):
    n = kind.shape[0]
    vals = np.empty(n, dtype=np.float64)
    nv = 0
    words = 0
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    err = 0
    while True:
        if j >= n:
            err = 1
            break
        k = kind[j]
        t = max(t + ii, max(xs[j] + xl, 0))
        if k == VAL or k == EMPTY:
            vals[nv] = float(data[j]) if k == VAL else 0.0
            nv += 1
            words += w
            if mem[0]:
                t += _stall(mem, words - w, w, False)
        elif not (k == STOP or k == DONE):
            err = 3
            break
        cons[j] = t
        j += 1
        if k == DONE:
            break
    return err, j, t, vals[:nv], cons


def _level_write(n: _Node) -> _Res:
    fmt, dim = n.params.get("format", "compressed"), n.params.get("dim")
    compressed = fmt == "compressed"
    if not compressed and (fmt != "dense" or dim is None):
        raise _NeedOracle(False)
    if dim is not None and not isinstance(dim, (int, np.integer)):
        raise _NeedOracle(False)
    (a,) = n.only("crd")
    _ints(a)
    err, j, t, writes, seg, crd, cons = _k_level_write(a.kind, a.data, a.sent, a.lat, compressed,
                                                      dim is not None, 0 if dim is None else int(dim),
                                                      n.mem(), n.ii)
    _check(err, (j, len(a)))
    level = Level("compressed", dim, seg.tolist(), crd.tolist()) if compressed else Level("dense", dim)
    return _Res({}, j, int(t), _counters(writes=writes), {"crd": cons}, level=level)


def _value_write(n: _Node) -> _Res:
    (a,) = n.only("val")
    w = n.tile.out_elements if n.tile is not None else 1
    err, j, t, vals, cons = _k_value_write(a.kind, a.data, a.sent, a.lat, n.mem(), w, n.ii)
    _check(err, (j, len(a)))
    written = vals.tolist() if n.tile is None else fast_tiles.written(n.tile, a)
    return _Res({}, j, int(t), _counters(writes=vals.shape[0] * w), {"val": cons}, vals=written)
