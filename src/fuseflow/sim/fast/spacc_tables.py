"""The tables behind spacc2 (the order-2 sparse accumulator): where an entry (mid, inner) lives
while its outer fiber accumulates, and the order it drains in.

Rows (distinct mid coordinates) get numbers in arrival order through a small hash table. Entries
start in a **dense table**: a row-major grid of rows × `width` cells (value, presence), so that an
accumulation is one indexed add and a row's cells lie together; entries are also listed in
arrival order (row, inner). When the grid would outgrow `DENSE_CELLS` (or be mostly empty), the
accumulator moves to a **hash table** keyed by (mid, inner), one lookup per accumulation. At the
drain, rows go in mid-coordinate order; a dense-table row that is at least 1/8 full is read by
scanning its cells (already in order), any other row's entries are sorted on their own.

    >>> table = HashTable.empty(8)
    >>> q = slot(*table, 5, 7)
    >>> bool(table.v[q] < 0)
    True
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from . import pool

DENSE_CELLS = 1 << 23  # cells (9 bytes each) the dense table may take before entries move to a hash table
DENSE_SLACK = 1 << 20  # ... and cells it may take beyond 64 per entry (a mostly empty grid moves too)


class HashTable(NamedTuple):
    """An open-addressing table (linear probing) of keys (k1, k2) -> v, v < 0 in an empty slot; its
    size a power of two."""
    k1: np.ndarray
    k2: np.ndarray
    v: np.ndarray

    @staticmethod
    def empty(size: int) -> HashTable:
        return HashTable(np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64),
                         np.full(size, -1, dtype=np.int64))


@njit(cache=True)
def slot(hk1, hk2, hv, a, b):
    """The slot of key (a, b) in a `HashTable` (its arrays: a step loop hands arrays, not records):
    where it is, or the empty slot where it goes."""
    mask = hv.shape[0] - 1
    h = (a * -7046029254386353131) ^ (b * -4417276706812531889)
    q = (h ^ (h >> 29)) & mask
    while hv[q] >= 0 and (hk1[q] != a or hk2[q] != b):
        q = (q + 1) & mask
    return q


@njit(cache=True)
def rehash(old, new, slots):
    """Move every key of table `old` into `new`, a larger, empty one; slots[v] follows each key."""
    hk1, hk2, hv = old
    for q in range(hv.shape[0]):
        if hv[q] >= 0:
            s = slot(new.k1, new.k2, new.v, hk1[q], hk2[q])
            new.k1[s] = hk1[q]
            new.k2[s] = hk2[q]
            new.v[s] = hv[q]
            slots[hv[q]] = s


@njit(cache=True)
def clear(hv, slots, n):
    """Empty the first n keys' slots of a hash table."""
    for q in range(n):
        hv[slots[q]] = -1


@njit(cache=True)
def to_hash(mp, ne, width):
    """Move the ne entries of spacc2's dense table (`spacc_order2.Map2` mp, `width` cells a row)
    into its (empty) hash table and their values into ex."""
    rw1, erow, ew2, ex, ents = mp.rw1, mp.erow, mp.ew2, mp.ex, mp.ents
    for e in range(ne):
        ex[e] = mp.dval[erow[e] * width + ew2[e]]
        q = slot(ents.k1, ents.k2, ents.v, rw1[erow[e]], ew2[e])
        ents.k1[q] = rw1[erow[e]]
        ents.k2[q] = ew2[e]
        ents.v[q] = e
        mp.eslot[e] = q


def dense_fits(rows: int, width: int, entries: int) -> bool:
    """Whether a dense table of rows × width cells is allowed for `entries` entries.

        >>> dense_fits(1024, 1024, 900_000), dense_fits(1 << 14, 1 << 14, 10_000)
        (True, False)
    """
    cells = rows * width
    return cells <= DENSE_CELLS and cells <= 64 * entries + DENSE_SLACK


def relayout(dval, dpres, rows: int, width: int, new_rows: int, new_width: int):
    """The dense table's cells in a grid of new_rows × new_width (new cells empty: their
    presence 0, their value never read); the old grid goes to the buffer pool."""
    nval = pool.take(new_rows * new_width, np.float64)
    npres = pool.take(new_rows * new_width, np.uint8)
    npres.fill(0)
    if rows and width:
        nval.reshape(new_rows, new_width)[:rows, :width] = dval.reshape(rows, width)
        npres.reshape(new_rows, new_width)[:rows, :width] = dpres.reshape(rows, width)
    if dval is not None:
        pool.give(dval, dpres)
    return nval, npres


class Drain(NamedTuple):
    """The drain order of spacc2's entries (`drain_order`): rows by mid coordinate (w1, entry
    offsets off), then per row its inner coordinates (c) and values (v) in order."""
    w1: np.ndarray
    off: np.ndarray
    c: np.ndarray
    v: np.ndarray


@njit(cache=True)
def drain_order(mp, mode, width, nr, ne):
    """Fill mp.drain (`Drain`) with the drain order of the nr rows' ne entries of spacc2's tables
    (`spacc_order2.Map2` mp). Mode 0 (dense table, `width` cells a row) empties the table's cells
    as it reads them; mode 1 reads the hash table's values (ex)."""
    rw1, erow, ew2, ex, dval, dpres = mp.rw1, mp.erow, mp.ew2, mp.ex, mp.dval, mp.dpres
    d_w1, d_off, d_c, d_v = mp.drain
    rows = np.argsort(rw1[:nr])
    rank = np.empty(nr, dtype=np.int64)
    for q in range(nr):
        rank[rows[q]] = q
        d_w1[q] = rw1[rows[q]]
    counts = np.zeros(nr + 1, dtype=np.int64)
    for e in range(ne):
        counts[rank[erow[e]] + 1] += 1
    for q in range(nr):
        counts[q + 1] += counts[q]
    d_off[:nr + 1] = counts[:nr + 1]
    scan = np.zeros(nr, dtype=np.bool_)
    if mode == 0:
        for q in range(nr):
            scan[q] = 8 * (d_off[q + 1] - d_off[q]) >= width
    fill = counts[:nr].copy()
    for e in range(ne):  # the entries of the rows that are not scanned, grouped by row
        r = rank[erow[e]]
        if not scan[r]:
            d_c[fill[r]] = ew2[e]
            d_v[fill[r]] = ex[e] if mode == 1 else 0.0
            fill[r] += 1
    for q in range(nr):
        lo = d_off[q]
        hi = d_off[q + 1]
        base = rows[q] * width
        if scan[q]:
            x = lo
            for c in range(width):
                if dpres[base + c]:
                    d_c[x] = c
                    d_v[x] = dval[base + c]
                    dpres[base + c] = 0
                    x += 1
            continue
        if hi - lo > 1:
            by = np.argsort(d_c[lo:hi])
            cs = d_c[lo:hi].copy()
            vs = d_v[lo:hi].copy()
            for x in range(hi - lo):
                d_c[lo + x] = cs[by[x]]
                d_v[lo + x] = vs[by[x]]
        if mode == 0:
            for x in range(lo, hi):
                d_v[x] = dval[base + d_c[x]]
                dpres[base + d_c[x]] = 0
