"""Channels of the streaming engine: bounded buffers of tokens with one cursor per reader, and
the running count of each channel's occupancy.

A channel holds a window of its stream: tokens `base` .. `base + n - 1` (absolute indices since
the stream began) in three arrays (`kind`, `data`, `sent`: token kind, payload, the producer's
step time) and, for streams of tiles, `tiles[i]` the tile of token i. The producer appends;
each reader has a cursor (tokens it consumed) and an array `cons` aligned with the window, where
its kernel writes the step time at which it consumed each token. `compact` drops the tokens
every reader consumed and counted, so memory follows the buffer size, not the stream length.

Occupancy (the most tokens waiting in the modelled FIFO at once) merges the send times with the
consume times in time order (`sync`). A consume can be counted only once a send at or after its
time is known, and in the unbounded-FIFO model a slow reader consumes long after a fast producer
sent: those consume times wait in a queue per reader, kept as arithmetic runs (start, step,
count), which a reader taking a token every II cycles fills with one run however long it lags.

The numbers kernels need live in shared tables that numba updates in place: `CH[c] = (base, n,
final)` per channel and `RD[r] = (cursor, k, j, best, head, runs, offset)` per reader: k sends
and j consumes merged so far, the most waiting so far, and the reader's queue of runs in
`QT[r]` (a ring: first run, number of runs, consumes already taken from the first run).

    >>> tables = Tables(1, 1)
    >>> ch = Channel(tables, 0, np.int64, capacity=4)
    >>> r = ch.add_reader(0)
    >>> ch.append([0, 0, 1], [5, 6, 0], [0, 1, 2])  # sent at times 0, 1, 2
    >>> tables.RD[r, 0] = 2                         # the reader consumed two, at times 2 and 3
    >>> ch.readers[0].cons[:2] = [2, 3]
    >>> int(sync(tables.CH, tables.RD, tables.QT, 0, r, 0, ch.sent, ch.readers[0].cons, False))
    -1
    >>> tables.RD[r, :4].tolist()  # cursor, sends merged, consumes merged, most waiting so far
    [2, 3, 1, 2]
    >>> ch.compact(), int(tables.CH[0, 0]), int(tables.CH[0, 1])
    (2, 2, 1)
"""
from __future__ import annotations

import numpy as np
from numba import njit

# CH columns
BASE, COUNT, FINAL = 0, 1, 2
# RD columns
CURSOR, MK, MJ, BEST, QHEAD, QRUNS, QOFF = range(7)
QUEUE_RUNS = 16  # runs each reader's queue starts with


class Tables:
    """The shared channel and reader tables of one graph run."""

    def __init__(self, channels: int, readers: int):
        self.CH = np.zeros((max(channels, 1), 3), dtype=np.int64)
        self.RD = np.zeros((max(readers, 1), 7), dtype=np.int64)
        self.QT = np.zeros((max(readers, 1), QUEUE_RUNS, 3), dtype=np.int64)

    def grow_queues(self) -> None:
        """Twice the runs per reader, each queue moved to the front of its ring."""
        RD, QT = self.RD, self.QT
        cap = QT.shape[1]
        new = np.zeros((QT.shape[0], 2 * cap, 3), dtype=np.int64)
        for r in range(QT.shape[0]):
            n = int(RD[r, QRUNS])
            idx = (RD[r, QHEAD] + np.arange(n)) % cap
            new[r, :n] = QT[r, idx]
            RD[r, QHEAD] = 0
        self.QT = new


class Reader:
    __slots__ = ("index", "cons", "node", "port")

    def __init__(self, index: int, capacity: int, node: int = -1, port: str = ""):
        self.index, self.node, self.port = index, node, port
        self.cons = np.empty(capacity, dtype=np.int64)


class Channel:
    """One stream's window; `dtype` of its payloads (int64 coordinates/references, float64
    values and tile numbers); `tile_shape` for streams of tiles."""

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
        """Tokens at the front that every reader consumed and whose sends are merged."""
        RD = self.tables.RD
        low = self.produced
        for r in self.readers:
            low = min(low, int(RD[r.index, CURSOR]), int(RD[r.index, MK]))
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
            self.tables.CH[self.index, BASE] += drop
            self.tables.CH[self.index, COUNT] = keep
        return drop

    def grow(self, capacity: int) -> None:
        """A larger window with the same tokens."""
        n = self.count
        old = (self.kind, self.data, self.sent, self.tiles)
        self._alloc(capacity)
        self.kind[:n], self.data[:n], self.sent[:n] = old[0][:n], old[1][:n], old[2][:n]
        if self.tiles is not None:
            self.tiles[:n] = old[3][:n]
        for r in self.readers:
            r.cons = np.empty(capacity, dtype=np.int64)

    def append(self, kind, data, sent, tiles=None) -> None:
        """Add tokens (for sources outside the kernels: `apply` inputs, oracle nodes)."""
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
def sync(CH, RD, QT, c, r, before, sent, cons, finished):
    """Merge channel c's send times with reader r's consume times (queued ones first, then those
    its kernel wrote at window positions before..cursor-1) as far as they are settled: the most
    tokens waiting at once is the largest (sends up to time t) - (consumes up to t) over the send
    times t (a consume and a send at the same time free the slot first), as
    `oracle.channel_occupancy`. A send is settled once a later consume is known, or the reader
    is finished; consumes not yet counted join the queue. Returns -1, or the window position
    where the queue ran out of runs (grow it and call again from there)."""
    base = CH[c, 0]
    end = RD[r, 0] - base
    produced = base + CH[c, 1]
    cap = QT.shape[1]
    k = RD[r, 1]
    j = RD[r, 2]
    best = RD[r, 3]
    head = RD[r, 4]
    nq = RD[r, 5]
    off = RD[r, 6]
    x = before
    while k < produced:
        t = sent[k - base]
        while nq > 0:  # queued consumes at or before t
            start = QT[r, head, 0]
            step = QT[r, head, 1]
            cnt = QT[r, head, 2]
            v = start + step * off
            if v > t:
                break
            take = cnt - off
            if step > 0 and (t - v) // step + 1 < take:
                take = (t - v) // step + 1
            j += take
            if off + take == cnt:
                head = (head + 1) % cap
                nq -= 1
                off = 0
            else:
                off += take
                break
        if nq == 0:  # then this call's consumes
            while x < end and cons[x] <= t:
                x += 1
                j += 1
            if x == end and not finished:
                break
        if k + 1 - j > best:
            best = k + 1 - j
        k += 1
    stop = -1
    while x < end:  # what is left waits in the queue, as runs
        v = cons[x]
        if nq > 0:
            tail = (head + nq - 1) % cap
            cnt = QT[r, tail, 2]
            if cnt == 1:
                QT[r, tail, 1] = v - QT[r, tail, 0]
                cnt = 2
                x += 1
            step = QT[r, tail, 1]
            nxt = QT[r, tail, 0] + step * cnt
            while x < end and cons[x] == nxt:
                cnt += 1
                nxt += step
                x += 1
            QT[r, tail, 2] = cnt
            if x == end:
                break
            v = cons[x]
        if nq == cap:
            stop = x
            break
        tail = (head + nq) % cap
        QT[r, tail, 0] = v
        QT[r, tail, 1] = 0
        QT[r, tail, 2] = 1
        nq += 1
        x += 1
    RD[r, 1] = k
    RD[r, 2] = j
    RD[r, 3] = best
    RD[r, 4] = head
    RD[r, 5] = nq
    RD[r, 6] = off
    return stop
