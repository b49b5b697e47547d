"""Channels of the streaming engine: bounded buffers of tokens with one cursor per reader.

A channel holds a window of its stream: tokens `base` .. `base + n - 1` (absolute indices since
the stream began) in three arrays (`kind`, `data`, `sent`: token kind, payload, the producer's
step time) and, for streams of tiles, `tiles[i]` the tile of token i. The producer appends;
each reader has a cursor (tokens it consumed) and an array `cons` aligned with the window (the
step time at which it consumed each token). `compact` drops what every reader has consumed
and counted (see `merge_occupancy`), so memory follows the buffer size, not the stream length.

The per-channel numbers kernels need live in two shared tables so that numba kernels read and
update them in place: `CH[c] = (base, n, final)` and `RD[r] = (cursor, k, j, best)`, where
k, j, best carry the running occupancy merge of reader r (see `merge_occupancy`).

    >>> tables = Tables(1, 1)
    >>> ch = Channel(tables, 0, np.int64, capacity=4)
    >>> r = ch.add_reader(0)
    >>> ch.append([0, 0, 1], [5, 6, 0], [0, 1, 2])  # sent at times 0, 1, 2
    >>> tables.RD[r, 0] = 2                         # the reader consumed two, at times 2 and 3
    >>> ch.readers[0].cons[:2] = [2, 3]
    >>> merge_occupancy(tables.CH, tables.RD, 0, r, ch.sent, ch.readers[0].cons, False)
    >>> tables.RD[r].tolist()  # cursor, sends settled, consumes counted, most waiting so far
    [2, 3, 1, 2]
    >>> ch.compact(), int(tables.CH[0, 0]), int(tables.CH[0, 1])
    (1, 1, 2)
"""
from __future__ import annotations

import numpy as np
from numba import njit

# CH columns
BASE, COUNT, FINAL = 0, 1, 2
# RD columns
CURSOR, MK, MJ, BEST = 0, 1, 2, 3


class Tables:
    """The shared channel and reader tables of one graph run."""

    def __init__(self, channels: int, readers: int):
        self.CH = np.zeros((max(channels, 1), 3), dtype=np.int64)
        self.RD = np.zeros((max(readers, 1), 4), dtype=np.int64)


class Reader:
    __slots__ = ("index", "cons", "node", "port")

    def __init__(self, index: int, capacity: int, node: int = -1, port: str = ""):
        self.index, self.node, self.port = index, node, port
        self.cons = np.empty(capacity, dtype=np.int64)


class Channel:
    """One stream's window; `dtype` of its payloads (int64 coordinates/references, float64
    values and tile ids); `tile_shape` for streams of tiles."""

    def __init__(self, tables: Tables, index: int, dtype, capacity: int, tile_shape: tuple | None = None,
                 lat: int = 0, keep: bool = False):
        self.tables, self.index, self.dtype = tables, index, np.dtype(dtype)
        self.tile_shape, self.lat = tile_shape, int(lat)
        self.readers: list[Reader] = []
        self.kept: list | None = [] if keep else None  # every token, for keep_streams
        self._alloc(capacity)

    def _alloc(self, capacity: int) -> None:
        self.kind = np.empty(capacity, dtype=np.int8)
        self.data = np.zeros(capacity, dtype=self.dtype)
        self.sent = np.empty(capacity, dtype=np.int64)
        self.tiles = None if self.tile_shape is None else np.zeros((capacity,) + self.tile_shape)

    @property
    def capacity(self) -> int:
        return self.kind.shape[0]

    @property
    def base(self) -> int:
        return int(self.tables.CH[self.index, BASE])

    @property
    def count(self) -> int:
        return int(self.tables.CH[self.index, COUNT])

    @property
    def produced(self) -> int:
        return self.base + self.count

    @property
    def final(self) -> bool:
        return bool(self.tables.CH[self.index, FINAL])

    def cursor(self, reader: int) -> int:
        """Window position of reader `reader`'s next token."""
        return int(self.tables.RD[reader, CURSOR] - self.tables.CH[self.index, BASE])

    def bytes_per_slot(self) -> int:
        tile = 8 * int(np.prod(self.tile_shape)) if self.tile_shape is not None else 0
        return 1 + self.dtype.itemsize + 8 + 8 * max(len(self.readers), 1) + tile

    def add_reader(self, index: int, node: int = -1, port: str = "") -> int:
        self.readers.append(Reader(index, self.capacity, node, port))
        return index

    def droppable(self) -> int:
        """Tokens at the front that every reader consumed and counted."""
        RD = self.tables.RD
        low = self.produced
        for r in self.readers:
            low = min(low, int(RD[r.index, CURSOR]), int(RD[r.index, MK]), int(RD[r.index, MJ]))
        return max(0, low - self.base)

    def room(self) -> int:
        """Free slots, counting what a compaction would free."""
        return self.capacity - self.count + self.droppable()

    def compact(self) -> int:
        """Drop the tokens every reader is done with; returns how many."""
        drop = self.droppable()
        if drop:
            n = self.count
            keep = n - drop
            for arr in (self.kind, self.data, self.sent):
                arr[:keep] = arr[drop:n]
            if self.tiles is not None:
                self.tiles[:keep] = self.tiles[drop:n]
            for r in self.readers:
                r.cons[:keep] = r.cons[drop:n]
            self.tables.CH[self.index, BASE] += drop
            self.tables.CH[self.index, COUNT] = keep
        return drop

    def grow(self, capacity: int) -> None:
        """A larger window with the same tokens."""
        n = self.count
        old = (self.kind, self.data, self.sent, self.tiles)
        cons = [r.cons for r in self.readers]
        self._alloc(capacity)
        self.kind[:n], self.data[:n], self.sent[:n] = old[0][:n], old[1][:n], old[2][:n]
        if self.tiles is not None:
            self.tiles[:n] = old[3][:n]
        for r, c in zip(self.readers, cons):
            r.cons = np.empty(capacity, dtype=np.int64)
            r.cons[:n] = c[:n]

    def append(self, kind, data, sent, tiles=None) -> None:
        """Add tokens (used by sources outside the kernels: `apply` inputs, oracle nodes)."""
        kind = np.asarray(kind, dtype=np.int8)
        m = kind.shape[0]
        if self.room() < m:
            self.compact()
            if self.capacity - self.count < m:
                self.grow(max(2 * self.capacity, self.count + m))
        n = self.count
        self.kind[n:n + m] = kind
        self.data[n:n + m] = np.asarray(data, dtype=self.dtype)
        self.sent[n:n + m] = np.asarray(sent, dtype=np.int64)
        if tiles is not None and self.tiles is not None:
            self.tiles[n:n + m] = tiles
        self.tables.CH[self.index, COUNT] = n + m

    def keep_new(self, start: int) -> None:
        """Record tokens start.. of the window (keep_streams)."""
        if self.kept is not None:
            n = self.count
            if n > start:
                tiles = self.tiles[start:n].copy() if self.tiles is not None else None
                self.kept.append((self.kind[start:n].copy(), self.data[start:n].copy(),
                                  self.sent[start:n].copy(), tiles))


@njit(cache=True)
def merge_occupancy(CH, RD, c, r, sent, cons, finished):
    """Advance reader r's occupancy merge over channel c: the most tokens waiting at once is the
    largest (tokens sent up to time t) - (tokens consumed up to t) over the send times t (a
    consume and a send at the same time free the slot first), as `oracle.channel_occupancy`.
    Token k is settled once a consume later than its send is known, or the reader is finished."""
    base = CH[c, 0]
    produced = base + CH[c, 1]
    consumed = RD[r, 0]
    k = RD[r, 1]
    j = RD[r, 2]
    best = RD[r, 3]
    while k < produced:
        t = sent[k - base]
        while j < consumed and cons[j - base] <= t:
            j += 1
        if j == consumed and not finished:
            break
        if k + 1 - j > best:
            best = k + 1 - j
        k += 1
    RD[r, 1] = k
    RD[r, 2] = j
    RD[r, 3] = best
