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
sent: those consume times wait in a queue per reader until the sends catch up. The queue holds
what the modelled FIFO holds, so it is kept small: runs of times with one difference (a reader
taking a token every cycle makes one run however long it lags), each run as two variable-length
integers of one to three bytes. This is the one part of the engine's memory that follows the
model rather than the buffers: a FIFO that the model fills with millions of tokens at irregular
times costs a few megabytes here.

A channel bounded to N tokens (a modelled FIFO of depth N, `Engine(depth=...)`; it has one reader)
lets its producer emit token j only once the reader consumed token j - N, and not before that
consume's time (`core.out_opened`, `core.gated`): the window keeps the last N tokens' consume times
for that (compaction keeps them, moving the reader's `cons` with the tokens).

The numbers kernels need live in a shared table that numba updates in place: `CH[c] = (base, n,
final, depth, reader)` per channel (depth 0: unbounded); `RD[r]` per reader: its cursor, the sends
(k) and consumes (j) merged so far, the most waiting so far, and its queue (see `_pop` and `_push`).

    >>> tables = Tables(1, 1)
    >>> ch = Channel(tables, 0, np.int64, capacity=4)
    >>> x = ch.add_reader(0)
    >>> ch.append([0, 0, 1], [5, 6, 0], [0, 1, 2])  # sent at times 0, 1, 2
    >>> tables.RD[x.index, 0] = 2                   # the reader consumed two, at times 2 and 3
    >>> x.cons[:2] = [2, 3]
    >>> int(sync(tables.CH, tables.RD, 0, x.index, 0, ch.sent, x.cons, False, x.queue))
    -1
    >>> tables.RD[x.index, :4].tolist()  # cursor, sends merged, consumes merged, most waiting so far
    [2, 3, 1, 2]
    >>> ch.compact(), int(tables.CH[0, 0]), int(tables.CH[0, 1])
    (2, 2, 1)
"""
from __future__ import annotations

import functools

import numpy as np
from numba import njit

from . import pool

# CH columns (DEPTH: the modelled FIFO's depth, 0 unbounded; READER: its one reader's row of RD)
BASE, COUNT, FINAL, DEPTH, READER = 0, 1, 2, 3, 4
# RD columns: cursor, merge state, then the queue: first byte, bytes used, times queued, the first
# time, the last one, the run being read (difference, times left) and the run being written
CURSOR, MK, MJ, BEST, QHEAD, QUSED, QN, QFIRST, QLAST, QHD, QHC, QTD, QTC = range(13)
QUEUE_BYTES = 4096  # a reader's queue starts this size and doubles when full (SpGEMM's needs 4 KB)
PROBE_AFTER = 16  # sends merged one by one after a stretch that was not regular
SKIP = 8  # sends before the next consume are skipped together when there are more than this


class Tables:
    """The shared channel and reader tables of one graph run."""

    def __init__(self, channels: int, readers: int):
        self.CH = np.zeros((max(channels, 1), 5), dtype=np.int64)
        self.RD = np.zeros((max(readers, 1), 13), dtype=np.int64)


@functools.lru_cache(maxsize=None)
def _empty(dtype) -> np.ndarray:
    """A shared array of no `dtype` items (what a released channel holds)."""
    return np.zeros(0, dtype=dtype)


class Reader:
    __slots__ = ("index", "cons", "node", "port", "queue", "synced", "unmerged")

    def __init__(self, index: int, capacity: int, node: int = -1, port: str = ""):
        self.index, self.node, self.port = index, node, port
        self.synced = -1  # tokens produced when its consumes were last merged (`Engine.count_consumed`)
        self.unmerged = -1  # on a bounded channel: the first consumed token not merged yet (-1: none)
        self.cons = pool.take(capacity, np.int64)
        self.queue = np.zeros(QUEUE_BYTES, dtype=np.uint8)  # waiting consume times (see sync)

    def grow_queue(self, RD) -> int:
        """Twice the queue, its bytes moved to the front; returns the bytes added."""
        r, q = self.index, self.queue
        size = q.shape[0]
        used, head = int(RD[r, QUSED]), int(RD[r, QHEAD])
        first = min(used, size - head)  # the bytes up to the ring's end, then those from its start
        self.queue = np.zeros(2 * size, dtype=np.uint8)
        self.queue[:first] = q[head:head + first]
        self.queue[first:used] = q[:used - first]
        RD[r, QHEAD] = 0
        return size


class Channel:
    """One stream's window; `dtype` of its payloads (int64 coordinates/references, float64
    values and tile numbers); `tile_shape` for streams of tiles."""

    def __init__(self, tables: Tables, index: int, dtype, capacity: int, tile_shape: tuple | None = None,
                 lat: int = 0, keep: bool = False):
        self.tables, self.index, self.dtype = tables, index, np.dtype(dtype)
        self.tile_shape, self.lat = tile_shape, int(lat)
        self.readers: list[Reader] = []
        self.kept: list | None = [] if keep else None  # every token, for keep_streams
        self.limit = capacity  # the chunk: the size the buffer may grow to before its producer waits
        self.depth = self.limit_depth = 0  # the modelled FIFO's depth (`bound`); 0: unbounded
        self._alloc(capacity)

    def bound(self, depth: int) -> None:
        """Model a FIFO of `depth` tokens (the channel has exactly one reader): its producer waits
        until the reader consumed the token `depth` before the one it emits."""
        self.depth = self.limit_depth = int(depth)
        self.tables.CH[self.index, DEPTH] = self.depth
        self.tables.CH[self.index, READER] = self.readers[0].index
        self._set_compact_at()

    def unbound(self) -> None:
        """Lift the bound (a deadlock's report runs on unbounded); `limit_depth` keeps it."""
        self.depth = 0
        self.tables.CH[self.index, DEPTH] = 0
        self._set_compact_at()

    def _alloc(self, capacity: int) -> None:
        self.kind = pool.take(capacity, np.int8)
        self.data = pool.take(capacity, self.dtype)
        self.sent = pool.take(capacity, np.int64)
        self.tiles = None if self.tile_shape is None else np.zeros((capacity,) + self.tile_shape)
        self._set_compact_at()

    def _set_compact_at(self) -> None:
        """`compact_at`: the token count above which the engine compacts the window before its
        producer's kernel call: half the buffer, and on a channel bounded to N tokens only once
        less than 2N slots are left (a call emits at most N there, so the producer still has
        room; compacting less often moves the same few kept tokens fewer times)."""
        capacity = self.kind.shape[0]
        room = (capacity + 1) // 2
        if self.depth:
            room = min(room, 2 * self.depth)
        self.compact_at = capacity - room

    @property
    def capacity(self) -> int:
        return self.kind.shape[0]

    @property
    def base(self) -> int:
        return self.tables.CH.item(self.index, BASE)

    @property
    def count(self) -> int:
        return self.tables.CH.item(self.index, COUNT)

    @property
    def produced(self) -> int:
        item = self.tables.CH.item
        return item(self.index, BASE) + item(self.index, COUNT)

    @property
    def final(self) -> bool:
        return bool(self.tables.CH.item(self.index, FINAL))

    def cursor(self, reader: int) -> int:
        """Window position of reader `reader`'s next token."""
        return self.tables.RD.item(reader, CURSOR) - self.tables.CH.item(self.index, BASE)

    def bytes_per_slot(self) -> int:
        tile = 8 * int(np.prod(self.tile_shape)) if self.tile_shape is not None else 0
        return 1 + self.dtype.itemsize + 8 + 8 * max(len(self.readers), 1) + tile

    def add_reader(self, index: int, node: int = -1, port: str = "") -> Reader:
        """A reader, number `index` (its row of RD), of node `node`'s input `port`."""
        reader = Reader(index, self.capacity, node, port)
        self.readers.append(reader)
        return reader

    def droppable(self) -> int:
        """Tokens at the front that every reader consumed and whose sends are merged."""
        RD = self.tables.RD
        low = self.produced - self.depth  # a bounded channel keeps its last `depth` consume times
        for r in self.readers:
            low = min(low, int(RD[r.index, CURSOR]), int(RD[r.index, MK]))
            if r.unmerged >= 0:  # and the consume times not merged into the occupancy count yet
                low = min(low, r.unmerged)
        return max(0, low - self.base)

    def buffer_room(self) -> int:
        """Free slots of the buffer, counting what a compaction would free."""
        return self.capacity - self.count + self.droppable()

    def bound_room(self) -> int | None:
        """Tokens the producer may still emit before the modelled FIFO is full (None: unbounded)."""
        if not self.depth:
            return None
        return int(self.tables.RD[self.readers[0].index, CURSOR]) + self.depth - self.produced

    def room(self) -> int:
        """Tokens the producer may emit now, counting what a compaction would free."""
        room = self.buffer_room()
        bound = self.bound_room()
        return room if bound is None else min(room, bound)

    def compact(self) -> int:
        """Drop the tokens every reader is done with; returns how many."""
        drop = self.droppable()
        if drop:
            n = self.count
            keep = n - drop
            for arr in (self.kind, self.data, self.sent):
                arr[:keep] = arr[drop:n]
            if self.depth:  # the consume times the producer still waits on move with their tokens
                for r in self.readers:
                    r.cons[:keep] = r.cons[drop:n]
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
        pool.give(*old[:3])
        for r in self.readers:
            old_cons = r.cons
            r.cons = pool.take(capacity, np.int64)
            if self.depth:
                r.cons[:n] = old_cons[:n]
            pool.give(old_cons)

    def release(self) -> list[np.ndarray]:
        """The run is over: the channel lets go of its buffers and returns them, for the engine to
        give to the `pool` at once, and drops its tiles (it holds no tokens after). The engine's
        runners and channels refer to each other: left to Python's cycle collector, which rarely
        runs in a process making few objects, a run's buffers outlived it (GPT-3 small2 b64's
        attention kernel: 5 MB of tiles a channel, 0.5 GB more resident each second of window runs)."""
        buffers = [self.kind, self.data, self.sent, *(r.cons for r in self.readers)]
        self.kind, self.data, self.sent = _empty(np.int8), _empty(self.dtype), _empty(np.int64)
        if self.tiles is not None:
            self.tiles = np.zeros((0,) + self.tile_shape)
        for r in self.readers:
            r.cons = _empty(np.int64)
        return buffers

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


@njit(cache=True, inline="always")
def _pop_varint(q, head, mask):
    """A variable-length integer (seven bits a byte, low first) from the ring `q` at `head`:
    (value, the next head, bytes read)."""
    value = np.int64(0)
    shift = 0
    n = 0
    while True:
        byte = q[head]
        head = (head + 1) & mask
        n += 1
        value |= (np.int64(byte) & 127) << shift
        shift += 7
        if byte < 128:
            return value, head, n


@njit(cache=True, inline="always")
def _regular(sent, cons, k, x, most, d):
    """How many steps (at most `most`) both sent[k:] and cons[x:] keep step d: checked 256 at a
    time without branches first (vectorized), then one by one."""
    s = sent[k:k + most + 1]
    c = cons[x:x + most + 1]
    m = 0
    while m + 256 <= most:
        bad = 0
        for i in range(m, m + 256):
            bad |= (s[i + 1] - s[i] - d) | (c[i + 1] - c[i] - d)
        if bad:
            break
        m += 256
    while m < most and s[m + 1] - s[m] == d and c[m + 1] - c[m] == d:
        m += 1
    return m


@njit(cache=True)
def sync(CH, RD, c, r, before, sent, cons, finished, q):
    """Merge channel c's send times with reader r's consume times (queued ones first, then those
    its kernel wrote at window positions before..cursor-1) as far as they are settled: the most
    tokens waiting at once is the largest (sends up to time t) - (consumes up to t) over the send
    times t (a consume and a send at the same time free the slot first), as
    `oracle.channel_occupancy`. A send is settled once a later consume is known, or the reader
    is finished; consumes not yet counted join the queue `q` (a ring of a power-of-two size).
    Returns -1, or the window position where the queue ran out of room (grow it and call again
    from there).

    The queue is its first time `first`, the rest of the run it starts (`hd`, `hc`: difference,
    times left), runs in the bytes (two variable-length integers each: difference, count; `head`,
    `used`), and the run still being written (`td`, `tc`); `n` times in all, `last` the latest."""
    base = CH[c, 0]
    end = RD[r, 0] - base
    produced = base + CH[c, 1]
    k, j, best = RD[r, 1], RD[r, 2], RD[r, 3]
    head, used, n, first, last = RD[r, 4], RD[r, 5], RD[r, 6], RD[r, 7], RD[r, 8]
    hd, hc, td, tc = RD[r, 9], RD[r, 10], RD[r, 11], RD[r, 12]
    mask = q.shape[0] - 1
    x = before
    probe = k
    while k < produced:
        t = sent[k - base]
        nxt = first if n > 0 else (cons[x] if x < end else t)  # the next consume to merge
        if nxt > t and k + SKIP < produced and sent[k + SKIP - base] < nxt:
            # sends before the next consume merge no consume: the count waiting grows by one
            # each, and the last of them is the most so far
            k += SKIP + np.searchsorted(sent[k + SKIP - base:produced - base], nxt)
            if k - j > best:
                best = k - j
            continue
        while n > 0 and first <= t:  # queued consumes at or before t
            if n == 1:
                n = 0
                j += 1
                break
            if hc == 0:  # the next run: from the bytes, or the one still being written
                if used > 0:
                    hd, head, m = _pop_varint(q, head, mask)
                    hc, head, m2 = _pop_varint(q, head, mask)
                    used -= m + m2
                else:
                    hd, hc, tc = td, tc, 0
            # drop the first time and the run's next ones up to t; the one after becomes first
            m = hc if hd == 0 else 1 if t - first < hd else min(hc, (t - first) // hd)
            if m < 1:
                m = 1
            first += hd * m
            hc -= m
            n -= m
            j += m
        if n == 0:  # then this call's consumes
            while x < end and cons[x] <= t:
                x += 1
                j += 1
            if x == end and not finished:
                break
        if k + 1 - j > best:
            best = k + 1 - j
        k += 1
        if n == 0 and before < x < end and k >= probe:
            # Regular stretch: while sends and consumes keep one common step d, each next send
            # merges exactly one more consume and the count waiting stays what it is: skip them.
            m = _regular(sent, cons, k - 1 - base, x, min(produced - k, end - 1 - x), cons[x] - cons[x - 1])
            if m:
                k += m
                j += m
                x += m
            else:
                probe = k + PROBE_AFTER
        elif n > 1 and hc > 0 and k < produced and first - hd <= sent[k - 1 - base] < first and k >= probe:
            # the same with the queue's current run for the consumes (sent[k:] with its step)
            m = _regular(sent, sent, k - 1 - base, k - 1 - base, min(produced - k, hc), hd)
            if m:
                k += m
                j += m
                first += m * hd
                hc -= m
                n -= m
            else:
                probe = k + PROBE_AFTER
    stop = -1
    while x < end:  # what is left waits in the queue
        v = cons[x]
        if n == 0:
            first = v
            hc = 0
        elif tc > 0 and v - last == td:
            tc += 1
        else:
            if tc > 0:  # close the run being written: at most twenty bytes
                if mask + 1 - used < 20:
                    stop = x
                    break
                for value in (td, tc):
                    pos = (head + used) & mask
                    while True:
                        byte = value & 127
                        value >>= 7
                        q[pos] = byte | 128 if value else byte
                        pos = (pos + 1) & mask
                        used += 1
                        if not value:
                            break
            td = v - last
            tc = 1
        last = v
        n += 1
        x += 1
    RD[r, 1], RD[r, 2], RD[r, 3] = k, j, best
    RD[r, 4], RD[r, 5], RD[r, 6], RD[r, 7], RD[r, 8] = head, used, n, first, last
    RD[r, 9], RD[r, 10], RD[r, 11], RD[r, 12] = hd, hc, td, tc
    return stop
