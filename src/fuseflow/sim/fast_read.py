"""Fast-engine kernels and drivers of the nodes that read a stored tensor: root, scan (level
scanners), locate and array (value reads).

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> format_tokens(apply("locate", {"crd": "1 3 S0 D", "ref": "2 0 S0 D"}, {"dim": 4}).outs["ref"])
    '9 3 S0 D'
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import fast_tiles
from .fast_core import _check, _counters, _ints, _NeedOracle, _Node, _Res, _stall
from .fast_stream import DONE, EMPTY, STOP, VAL, _is_elem


@njit(cache=True)
def _k_scan(kind, data, xs, xl, compressed, dim, seg, crd, mem, ii, stride):
    n = kind.shape[0]
    nseg = seg.shape[0] - 1
    total = 0
    any_empty = False
    for i in range(n):  # output length (up to the first bad token)
        k = kind[i]
        if k == VAL:
            if compressed:
                r = data[i]
                if r < 0 or r >= nseg:
                    break
                m = seg[r + 1] - seg[r]
                total += (m if m > 0 else 0) + 1
            else:
                total += dim + 1
        elif k == EMPTY and not compressed:
            total += dim + 1
            any_empty = True
        else:
            total += 1
        if k == DONE:
            break
    ck = np.empty(total, dtype=np.int8)
    rk = np.empty(total, dtype=np.int8) if any_empty else ck
    cd = np.empty(total, dtype=np.int64)
    rd = np.empty(total, dtype=np.int64)
    ot = np.empty(total, dtype=np.int64)
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    pos = 0
    reads = 0
    words = 0
    err = 0
    while True:
        if pos >= n:
            err = 1
            break
        k = kind[pos]
        rt = xs[pos] + xl
        if rt < 0:
            rt = 0
        if k == VAL:
            r = data[pos]
            first = -1
            if compressed:
                if r < 0 or r >= nseg:
                    err = 2
                    break
                reads += 2
                for p in range(seg[r], seg[r + 1]):
                    reads += 1
                    t = max(t + ii, rt)
                    if mem[0]:
                        t += _stall(mem, words, reads - words, False)
                        words = reads
                    rt = 0
                    if first < 0:
                        first = t
                    ck[j] = VAL
                    cd[j] = crd[p]
                    rd[j] = p
                    ot[j] = t
                    j += 1
            else:
                base = r * dim if stride == 0 else r
                step = 1 if stride == 0 else stride
                for c in range(dim):
                    t = max(t + ii, rt)
                    rt = 0
                    if first < 0:
                        first = t
                    ck[j] = VAL
                    cd[j] = c
                    rd[j] = base + c * step
                    ot[j] = t
                    j += 1
                if any_empty:
                    for q in range(j - dim, j):
                        rk[q] = VAL
            t = max(t + ii, rt)
            if mem[0]:
                t += _stall(mem, words, reads - words, False)
                words = reads
            if first < 0:
                first = t
            ck[j] = STOP
            rk[j] = STOP
            cd[j] = 0
            rd[j] = 0
            ot[j] = t
            j += 1
            cons[pos] = first
        elif k == EMPTY:
            first = -1
            if not compressed:
                for c in range(dim):
                    t = max(t + ii, rt)
                    rt = 0
                    if first < 0:
                        first = t
                    ck[j] = VAL
                    rk[j] = EMPTY
                    cd[j] = c
                    rd[j] = 0
                    ot[j] = t
                    j += 1
            t = max(t + ii, rt)
            if first < 0:
                first = t
            ck[j] = STOP
            rk[j] = STOP
            cd[j] = 0
            rd[j] = 0
            ot[j] = t
            j += 1
            cons[pos] = first
        elif k == STOP or k == DONE:
            t = max(t + ii, rt)
            if mem[0]:
                t += _stall(mem, words, 0, k == DONE)
            ck[j] = k
            rk[j] = k
            lv = data[pos] + 1 if k == STOP else 0
            cd[j] = lv
            rd[j] = lv
            ot[j] = t
            j += 1
            cons[pos] = t
        else:
            err = 3
            break
        pos += 1
        if k == DONE:
            break
    return err, pos, j, t, reads, ck, rk, cd, rd, ot, cons


@njit(cache=True)
def _k_locate(ak, ad, a_s, al, bk, bd, b_s, bl, dim, ii, stride):
    na = ak.shape[0]
    nb = bk.shape[0]
    n = min(na, nb)
    ok = np.empty(n, dtype=np.int8)
    od = np.empty(n, dtype=np.int64)
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    err = 0
    while True:
        if j >= na or j >= nb:
            err = 1
            break
        a = ak[j]
        b = bk[j]
        t = max(t + ii, max(a_s[j] + al, b_s[j] + bl, 0))
        if a == VAL and b == VAL:
            x = ad[j]
            if x < 0 or x >= dim:
                err = 2
                break
            ok[j] = VAL
            od[j] = bd[j] * dim + x if stride == 0 else bd[j] + x * stride
        elif _is_elem(a) and _is_elem(b):
            ok[j] = EMPTY
            od[j] = 0
        elif a == STOP and b == STOP and ad[j] == bd[j]:
            ok[j] = STOP
            od[j] = ad[j]
        elif a == DONE and b == DONE:
            ok[j] = DONE
            od[j] = 0
        else:
            err = 3
            break
        cons[j] = t
        j += 1
        if a == DONE:
            break
    return err, j, t, ok, od, cons


@njit(cache=True)
def _k_array(kind, data, xs, xl, vals, fill, mem, w, ii):
    n = kind.shape[0]
    nv = vals.shape[0]
    ok = np.empty(n, dtype=np.int8)
    od = np.empty(n, dtype=np.float64)
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    reads = 0
    err = 0
    while True:
        if j >= n:
            err = 1
            break
        k = kind[j]
        t = max(t + ii, max(xs[j] + xl, 0))
        if k == VAL:
            r = data[j]
            if r < 0 or r >= nv:
                err = 2
                break
            reads += w
            if mem[0]:
                t += _stall(mem, reads - w, w, False)
            ok[j] = VAL
            od[j] = vals[r]
        elif k == EMPTY:
            ok[j] = VAL
            od[j] = fill
        elif k == STOP or k == DONE:
            if mem[0]:
                t += _stall(mem, reads, 0, k == DONE)
            ok[j] = k
            od[j] = data[j]
        else:
            err = 3
            break
        cons[j] = t
        j += 1
        if k == DONE:
            break
    return err, j, t, reads, ok, od, cons


def _root(n: _Node) -> _Res:
    if n.ins:
        raise _NeedOracle(False)
    t1 = max(n.ii, 0)
    out = n.out(np.array([VAL, DONE], dtype=np.int8), np.zeros(2, dtype=np.int64),
                np.array([0, t1], dtype=np.int64))
    return _Res({"ref": out}, 2, t1, _counters(), {})


def _scan(n: _Node) -> _Res:
    (ref,) = n.only("ref")
    _ints(ref)
    try:
        level = n.ctx().level()
    except Exception:
        raise _NeedOracle(False) from None
    fmt, dim = n.params.get("format", level.format), n.params.get("dim")
    stride = n.params.get("stride") or 0
    if fmt != level.format or (not level.is_compressed and dim is not None and dim != level.dim) or \
            not isinstance(stride, (int, np.integer)) or stride < 0 or (stride and level.is_compressed):
        raise _NeedOracle(False)
    if level.is_compressed:
        try:
            seg, crd = n.array(level.seg, np.int64), n.array(level.crd, np.int64)
        except (TypeError, ValueError, OverflowError):
            raise _NeedOracle(False) from None
        if (seg.ndim != 1 or crd.ndim != 1 or seg.shape[0] < 1
                or (seg.shape[0] > 1 and (seg.min() < 0 or seg.max() > crd.shape[0]))):
            raise _NeedOracle(False)
        ldim = 0
    else:
        if not isinstance(level.dim, (int, np.integer)) or level.dim < 0:
            raise _NeedOracle(False)
        seg = crd = np.zeros(1, dtype=np.int64)
        ldim = int(level.dim)
    err, pos, j, t, reads, ck, rk, cd, rd, ot, cons = _k_scan(
        ref.kind, ref.data, ref.sent, ref.lat, level.is_compressed, ldim, seg, crd, n.mem(), n.ii, int(stride))
    _check(err, (pos, len(ref)))
    return _Res({"crd": n.out(ck, cd, ot), "ref": n.out(rk, rd, ot)}, j, int(t), _counters(reads=reads),
                {"ref": cons})


def _locate(n: _Node) -> _Res:
    a, b = n.only("crd", "ref")
    _ints(a, b)
    dim = n.params.get("dim")
    if dim is None:
        try:
            dim = n.ctx().level().dim
        except Exception:
            raise _NeedOracle(False) from None
    stride = n.params.get("stride") or 0
    if not isinstance(dim, (int, np.integer)) or not isinstance(stride, (int, np.integer)) or stride < 0:
        raise _NeedOracle(False)
    err, j, t, ok, od, cons = _k_locate(a.kind, a.data, a.sent, a.lat, b.kind, b.data, b.sent, b.lat,
                                        int(dim), n.ii, int(stride))
    _check(err, (j, len(a)), (j, len(b)))
    return _Res({"ref": n.out(ok[:j], od[:j], cons)}, j, int(t), _counters(), {"crd": cons, "ref": cons})


def _array(n: _Node) -> _Res:
    (ref,) = n.only("ref")
    _ints(ref)
    try:
        tensor = n.ctx().tensor()
        vals = n.array(tensor.vals, np.float64)
        if n.tile is not None and vals.ndim == 1:
            vals = vals.reshape(-1, 1)
        fill = float(n.params.get("fill", getattr(tensor, "fill", 0.0)))
    except Exception:
        raise _NeedOracle(False) from None
    spec, table = n.tile, None
    if spec is not None:
        key = ("tiles", id(tensor.vals), spec, fill)
        hit = n.cache.get(key)
        if hit is None or hit[0] is not tensor.vals:
            hit = (tensor.vals, fast_tiles.array_table(spec, vals, fill))
            n.cache[key] = hit
        table = hit[1]
        ids = np.arange(vals.shape[0], dtype=np.float64)
        err, j, t, reads, ok, od, cons = _k_array(ref.kind, ref.data, ref.sent, ref.lat, ids,
                                                  float(vals.shape[0]), n.mem(), spec.out_elements, n.ii)
    elif vals.ndim != 1:
        raise _NeedOracle(False)
    else:
        err, j, t, reads, ok, od, cons = _k_array(ref.kind, ref.data, ref.sent, ref.lat, vals, fill, n.mem(), 1,
                                                  n.ii)
    _check(err, (j, len(ref)))
    return _Res({"val": n.out(ok, od, cons, table)}, j, int(t), _counters(reads=reads), {"ref": cons})
