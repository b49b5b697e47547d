"""The streaming graph driver: runs every node's kernel on bounded channels until the graph is done.

Nodes are visited in rounds, in id order (the graph is a DAG). A visit calls the node's kernel,
which runs until an input has no token yet, an output buffer is full, or it is done; a node is
visited again only when what stopped it changed (new tokens, freed room). Channels drop what
every reader consumed, so memory follows the buffer sizes, not the streams' lengths. When a
whole round moves nothing, some producer is waiting for room that its readers cannot free until
another stream moves (reconvergent paths with different rates): its full buffers grow, within
the memory budget. None of this changes timing: a token's time follows from the times of the
tokens it depends on, whichever call computes it (see `core`).

With `depth` (modelled FIFOs, `HwConfig.channel_depth`) channels are bounded and a producer waits
for its reader: that part of the driver (bounds, the rounds' readiness marking, lean visits,
deadlock reports) is `bounded_driver`'s, which `Engine` extends.

Memory the engine allocates (buffers, accumulator tables, written tensors) goes through
`reserve`, which checks it against the run's `Budget` and raises `MemoryLimitError` naming the
node instead of letting the operating system kill the process.

    >>> from fuseflow.sam.graph import SamGraph
    >>> g = SamGraph("chain"); r = g.add("root")
    >>> s = g.add("scan", {"tensor": "", "level": 0, "format": "dense", "dim": 4}, ref=r.out("ref"))
    >>> _ = g.add("level_write", {"tensor": "o", "level": 0, "format": "dense", "dim": 4}, crd=s.out("crd"))
    >>> run = Engine(g, {}, chunk=2).run()
    >>> run.cycles, run.stream_tokens[s.out("crd")]
    (7, 6)
"""
from __future__ import annotations

import functools
import time

import numpy as np

from ...memory import Budget, format_bytes
from ...sam.graph import GraphError, SamGraph, Stream
from ...sam.primitives import PRIMITIVES
from ..hw import HwConfig
from ..oracle import WRITERS, GraphRun
from ..storage import WrittenTensor
from . import pool
from .bounded_driver import BoundedDriver, Overflow
from .by_oracle import OracleRunner
from .channel import BASE, BEST, COUNT, CURSOR, FINAL, Channel, Tables, sync
from .core import DONE, FAIL, GROW, PORT, STEPS, WAIT_IN, WAIT_OUT, YIELD, NeedOracle, Runner, T, compiled_entry
from .runners import RUNNERS
from .stream import token_list

DEFAULT_CHUNK = 1 << 18  # tokens a channel buffers before its producer waits
FIRST_SIZE = 1 << 16  # a buffer's first size (about 2 MB with its consume times): it grows to the chunk in
GROW_AFTER = 4  # one step while its producer waits, once the stream has carried GROW_AFTER times what the
# buffer holds (a long stream): one copy of the window's tokens, where doubling copied them at every size;
# a stream of up to 64 K tokens passes in one kernel call (docs/log/performance-history.md, 2026-11-29)
FIRST_TILES = 1 << 10  # ... and of a channel of tiles (a 64x64 tile is 32 KB)
CHECK_EVERY = 16 << 20  # bytes allocated between two checks against the memory budget
CHANNEL_BYTES = 1 << 30  # what the buffers of one kernel may take before their size is lowered
TILE_CHANNEL_BYTES = 16 << 20  # one channel of tiles
MIN_CHUNK = 64


class KernelFailed(Exception):
    """A kernel met input the primitive does not accept (the oracle gives the exact error)."""

    def __init__(self, runner):
        super().__init__(f"n{runner.id} {runner.kind}")
        self.runner = runner


WHOLE = 0  # chunk=WHOLE: no bounded buffers, every stream is kept whole (as the oracle does)
WHOLE_START = 1 << 12  # a whole-stream buffer's first size; it doubles when full


def chunk_for(channels: int, chunk: int | None) -> int:
    """Buffer size in tokens: `chunk` if given, else the default lowered so that `channels`
    buffers stay within CHANNEL_BYTES."""
    if chunk == WHOLE:
        return WHOLE_START
    if chunk is not None:
        return max(1, int(chunk))
    per = CHANNEL_BYTES // max(1, channels) // 33
    return max(MIN_CHUNK, min(DEFAULT_CHUNK, 1 << max(per.bit_length() - 1, 0)))


def buffer_bytes(graph: SamGraph, chunk: int | None = None) -> int:
    """Bytes of a graph's channel buffers at their starting size (tiles not counted)."""
    readers: dict = {}
    for node in graph.nodes:
        for stream in node.inputs.values():
            readers[stream] = readers.get(stream, 0) + 1
    streams = [Stream(n.id, p) for n in graph.nodes if n.kind in PRIMITIVES
               for p in PRIMITIVES[n.kind].ports(n.arity)[1]]
    size = chunk_for(len(streams), chunk)
    return sum(size * (17 + 8 * max(readers.get(s, 0), 1)) for s in streams)


@functools.lru_cache(maxsize=None)
def _outputs(kind: str, arity: int) -> int:
    """How many output streams a node of primitive `kind` with `arity` has (counted once)."""
    return len(PRIMITIVES[kind].ports(arity)[1])


class Engine(BoundedDriver):
    """One run of a graph. `chunk`: tokens per channel buffer (None: a default that fits the
    memory budget; an int, or a callable (stream) -> int for per-channel sizes in tests; WHOLE
    (0): streams kept whole, the engine without its bound, for comparison);
    `on_events(done)`: called about twice a second with the token events so far."""

    def __init__(self, graph: SamGraph, tensors: dict, hw: HwConfig | None = None, *, chunk=None,
                 budget: Budget | None = None, keep_streams: bool = False, on_events=None,
                 record_consumed: bool = False, what: str | None = None, sources: dict | None = None,
                 depth: int | dict | None = None, first_unbounded: bool = False):
        self.graph, self.tensors, self.hw = graph, tensors, hw or HwConfig()
        self.budget, self.on_events = budget, on_events
        self.whole = chunk == WHOLE
        self.what = what or f"graph {graph.name}"
        self.reserved = self.unchecked = 0
        self.record_consumed = record_consumed
        self.consumed: dict = {}
        self._sync = None  # `channel.sync`'s compiled function, once it ran (`core.compiled_entry`)
        cache: dict = {}
        nodes = graph.nodes
        sources = sources or {}
        readers = sum(len(n.inputs) for n in nodes)
        streams = len(sources) + sum(_outputs(n.kind, n.arity) for n in nodes if n.kind in PRIMITIVES)
        self.tables = Tables(streams, readers)
        fixed = chunk_for(streams, None if callable(chunk) else chunk)
        size = chunk if callable(chunk) else (lambda stream: fixed)
        self.channels: dict[Stream, Channel] = {}
        self.runners: list[Runner] = []
        self._readers = -1
        for stream, arr in sources.items():  # streams given whole (`apply`), fed in chunks
            ch = Channel(self.tables, len(self.channels), arr.data.dtype, size(stream),
                         None if arr.tiles is None else arr.tiles.shape[1:], arr.lat, keep_streams)
            self.channels[stream] = ch
            self.runners.append(Source(stream, arr, ch, self))
        for node in nodes:
            if node.kind not in RUNNERS:
                raise GraphError(f"n{node.id}: unknown primitive {node.kind!r}")
            for port, stream in node.inputs.items():
                if stream not in self.channels:
                    raise GraphError(f"n{node.id} {node.kind}: input {port} reads {stream}, which is not "
                                     "an output of an earlier node")
            runner = self._runner(RUNNERS[node.kind], node, cache)
            for port in runner.outs:
                s = Stream(node.id, port)
                tile = runner.out_tile(port)
                cap = size(s)
                if tile is not None and chunk is None:
                    cap = max(16, min(cap, TILE_CHANNEL_BYTES // (8 * int(np.prod(tile)))))
                first = FIRST_SIZE if tile is None else FIRST_TILES
                ch = Channel(self.tables, len(self.channels), runner.out_dtype(port), min(cap, first), tile,
                             runner.lat, keep_streams)
                ch.limit = cap
                self.reserve(ch.capacity * ch.bytes_per_slot(), runner)
                self.channels[s] = ch
            runner.attach_outputs([self.channels[Stream(node.id, p)] for p in runner.outs])
            self.runners.append(runner)
        for r in self.runners:  # what a visit reads: (channel row, reader row, channel, reader) per input
            r.in_rows = [(ch.index, x, ch, reader) for ch, x, reader in zip(r.in_ch, r.readers, r.reader_objects())]
            r.out_chans = [ch.index for ch in r.out_ch]
        self.keeps = keep_streams
        self.finished = 0  # nodes done
        self._apply_depth(depth, first_unbounded)

    def _runner(self, make, node, cache) -> Runner:
        """The node's kernel runner bound to its input channels, or the oracle's if the kernel
        cannot run it."""
        first = self._readers
        for attempt in (make, OracleRunner):
            self._readers = first
            runner = attempt(node, self.tensors, self.hw, cache)
            runner.engine = self
            try:
                runner.check()
                in_ch, readers = [], []
                for port in runner.ins:
                    ch = self.channels[node.inputs[port]]
                    in_ch.append(ch)
                    readers.append(ch.add_reader(self._next_reader(), node.id, port))
                runner.attach_inputs(in_ch, readers)
                return runner
            except NeedOracle:
                for ch in {id(c): c for c in getattr(runner, "in_ch", [])}.values():
                    ch.readers = [x for x in ch.readers if x.node != node.id]
        raise AssertionError("the oracle runs every node")

    def _next_reader(self) -> int:
        self._readers += 1
        return self._readers

    # -- memory ----------------------------------------------------------------------------------------
    def reserve(self, nbytes: int, runner: Runner) -> None:
        """Account for `nbytes` more; MemoryLimitError when the budget does not allow what was
        allocated since the last check (checks come every CHECK_EVERY bytes)."""
        self.reserved += nbytes
        self.unchecked += nbytes
        if self.budget is not None and self.unchecked > CHECK_EVERY:
            self.budget.check(self.unchecked, f"{self.what} n{runner.id} {runner.kind} (engine buffers "
                                              f"{format_bytes(self.reserved)} so far)")
            self.unchecked = 0

    def enlarge(self, arr: np.ndarray, runner: Runner, need: int | None = None) -> np.ndarray:
        """A copy of `arr` at least twice (and at least `need`) as long; `arr` goes to the pool."""
        size = max(2 * arr.shape[0], need or 0, 16)
        self.reserve((size - arr.shape[0]) * arr.itemsize, runner)
        out = pool.take(size, arr.dtype) if arr.ndim == 1 else np.empty((size,) + arr.shape[1:], dtype=arr.dtype)
        out[:arr.shape[0]] = arr
        pool.give(arr)
        return out

    def _grow_channel(self, ch: Channel, runner: Runner, need: int = 0) -> None:
        size = need or 2 * ch.capacity
        self.reserve((size - ch.capacity) * ch.bytes_per_slot(), runner)
        ch.grow(size)
        for r in self.runners:
            if ch in r.in_ch or ch in r.out_ch:
                r.invalidate()

    # -- running ---------------------------------------------------------------------------------------
    def _drained(self, r: Runner) -> int:
        """The progress of r's output channels' readers: their cursors and sends merged (the
        numbers a channel's room grows with) summed; it grows whenever some room may have."""
        rows = getattr(r, "out_rows", None)
        if rows is None:
            rows = r.out_rows = [x.index for ch in r.out_ch for x in ch.readers]
        item = self.tables.RD.item
        total = 0
        for x in rows:
            total += item(x, 0) + item(x, 1)
        return total

    def _visit(self, r: Runner) -> bool:
        """Call r's kernel until it waits; True if it moved. (Called once per kernel call of a
        bounded run: the channel numbers are read from the tables directly.)"""
        steps = r.S.item(STEPS)
        moved_status = r.status
        CH, RD = self.tables.CH.item, self.tables.RD.item
        while True:
            if not self.whole:
                for ch in r.out_ch:
                    if CH(ch.index, COUNT) > ch.compact_at:
                        ch.compact()
            if r.lean:
                status = r.call()
                self._merge_bounded(r, status == DONE)
            else:
                before_in = [RD(x, CURSOR) - CH(c, BASE) for c, x, _, _ in r.in_rows]
                before_out = [CH(c, COUNT) for c in r.out_chans]
                status = r.call()
                self._after(r, status, before_in, before_out)
            if status == GROW:
                r.grow()
                continue
            if status == WAIT_OUT and self._room_made(r):
                continue
            if status == YIELD:  # the runner emptied its log
                continue
            break
        r.status = status
        for n in r.neighbours:
            n.dirty = True
        if status == DONE:
            r.done = True
            self.finished += 1
            for ch in r.out_ch:
                self.tables.CH[ch.index, FINAL] = 1
        elif status == FAIL or r.failed:
            raise KernelFailed(r)
        elif status == WAIT_IN:
            r.waiting = r.S.item(PORT)  # the input its kernel waits on
            r.wait_row = c = r.in_rows[r.waiting][0]
            r.seen = CH(c, BASE) + CH(c, COUNT)
        elif status == WAIT_OUT:
            r.rooms = self._drained(r)
        return r.S.item(STEPS) != steps or status != moved_status

    def _room_made(self, r: Runner) -> bool:
        """r waits for room: grow its full buffers that are below their chunk to the chunk (a
        whole stream's to twice its size), or note that a compaction frees room; True if r may
        go on."""
        CH = self.tables.CH.item
        for ch in r.out_ch:
            if CH(ch.index, COUNT) == ch.kind.shape[0]:
                break
        else:  # no buffer is full: a bound holds r back
            return False
        full = [ch for ch in r.out_ch if CH(ch.index, COUNT) == ch.kind.shape[0]]
        growing = [ch for ch in full if self.whole or (ch.capacity < ch.limit and not ch.droppable()
                                                      and ch.produced >= GROW_AFTER * ch.capacity)]
        for ch in growing:
            self._grow_channel(ch, r, 0 if self.whole else ch.limit)
        return bool(growing) or any(ch.droppable() for ch in full)

    def _after(self, r: Runner, status: int, before_in, before_out) -> None:
        """Tile values and written tensors (`Runner.after`), kept streams, and the occupancy
        count of what the call consumed."""
        r.after(before_in, before_out)
        if self.keeps:
            for ch, start in zip(r.out_ch, before_out):
                if ch.kept is not None:
                    ch.keep_new(start)
        self.count_consumed(r, before_in, status == DONE)

    def count_consumed(self, r: Runner, before_in, finished: bool) -> None:
        t = self.tables
        CH, RD = t.CH.item, t.RD.item
        for (c, x, ch, reader), b in zip(r.in_rows, before_in):
            base = CH(c, BASE)
            cursor = RD(x, CURSOR)
            if self.record_consumed:
                self.consumed.setdefault(x, []).extend(reader.cons[b:cursor - base].tolist())
            produced = base + CH(c, COUNT)
            if not finished and b == cursor - base and reader.synced == produced:
                continue  # nothing consumed and nothing sent since the last merge: nothing to merge
            if ch.depth:  # bounded: merge a quarter buffer of consumes at a time (their cons move
                if reader.unmerged < 0:  # with compaction, which keeps what is not merged)
                    reader.unmerged = base + b
                if not finished and cursor - reader.unmerged < ch.kind.shape[0] // 4:
                    continue
                b, reader.unmerged = reader.unmerged - base, -1
            reader.synced = produced
            self._merge(r, c, x, ch, reader, b, finished)
            if self.overflow is not None and RD(x, BEST) > self.overflow[x]:
                raise Overflow()

    def _merge(self, r: Runner, c: int, x: int, ch: Channel, reader, b: int, finished: bool) -> None:
        """Merge reader x's consumes from window position b (`channel.sync`), growing its queue
        as it needs."""
        t = self.tables
        while True:
            args = (t.CH, t.RD, c, x, b, ch.sent, reader.cons, finished, reader.queue)
            if self._sync is None:  # the first merge goes through numba's dispatcher
                stop = sync(*args)
                self._sync = compiled_entry(sync, args)
            else:
                stop = self._sync(*args)
            if stop < 0:
                return
            self.reserve(reader.grow_queue(t.RD), r)
            b = int(stop)

    def _unstick(self) -> None:
        """No node moved in a whole round: grow the full buffers of the nodes waiting for room;
        where only bounded channels' depths hold them back, the graph is deadlocked."""
        if not self._grow_waiting():
            if self.depth is not None:
                raise self._deadlock()
            waiting = [f"n{r.id} {r.kind}" for r in self.runners if not r.done][:8]
            raise AssertionError(f"fast engine: no node can move ({', '.join(waiting)})")

    def _grow_waiting(self) -> bool:
        """Grow the full buffers (not the bounds) of the nodes waiting for room; False if none."""
        grown = False
        for r in self.runners:
            if r.done or r.status != WAIT_OUT:
                continue
            for ch in r.out_ch:
                if ch.buffer_room() == 0 and (ch.bound_room() is None or ch.bound_room() > 0):
                    self._grow_channel(ch, r)
                    grown = True
            r.status = 0
        self._touch_all()
        return grown

    def run(self) -> GraphRun:
        """Run every node to the end; the channels' buffers go back to the `pool` after."""
        try:
            last_report = time.monotonic()
            live = list(self.runners)
            batch = self._batch()
            while live:
                finished = self.finished
                moved = self._round(live, batch)
                if not moved and batch:  # a round that visits every node that can move
                    self._touch_all()
                    moved = self._round(live, 0)
                if self.finished != finished:
                    live = [r for r in live if not r.done]
                if live and not moved:
                    self._unstick()
                if self.on_events is not None and time.monotonic() - last_report > 0.5:
                    last_report = time.monotonic()
                    self.on_events(self.events())
            self._check_consumed()
            return self._result()
        finally:
            for r in self.runners:
                r.invalidate()
                r.release()
            pool.give(*[buffer for ch in self.channels.values() for buffer in ch.release()])

    def events(self) -> int:
        """Token events so far: tokens produced on every stream."""
        return int(sum(self.tables.CH[ch.index, 0] + self.tables.CH[ch.index, 1] for ch in self.channels.values()))

    def _check_consumed(self) -> None:
        for r in self.runners:
            for ch, x in zip(r.in_ch, r.readers):
                if self.tables.RD[x, 0] != ch.produced:
                    raise KernelFailed(r)

    def stream_arrays(self, stream: Stream):
        """(kind, data, sent, tiles) of every token a kept stream carried."""
        return _kept(self.channels[stream])

    # -- results ---------------------------------------------------------------------------------------
    def _result(self) -> GraphRun:
        written: dict[str, WrittenTensor] = {}
        node_steps, occupancy = {}, {}
        counters = {"flops": 0, "mem_reads": 0, "mem_writes": 0}
        cycles = 0
        for r in self.runners:
            if r.node is None:  # a source
                continue
            node_steps[r.id] = int(r.S[STEPS])
            for key, value in r.counters().items():
                counters[key] += value
            reader = dict(zip(r.ins, r.readers))
            for port, stream in r.node.inputs.items():
                occupancy[stream] = int(self.tables.RD[reader[port], 3])
            if r.kind in WRITERS:
                cycles = max(cycles, int(r.S[T]))
                left = r.finish()
                out = written.setdefault(r.params["tensor"], WrittenTensor())
                if r.kind == "level_write":
                    k = r.params.get("level", 0)
                    if k in out.levels:
                        raise GraphError(f"n{r.id}: level {k} of {r.params['tensor']} is written twice")
                    out.levels[k] = left["level"]
                else:
                    if out.vals is not None:
                        raise GraphError(f"n{r.id}: values of {r.params['tensor']} are written twice")
                    out.vals = left["vals"]
        kept = {s: ch for s, ch in self.channels.items() if ch.kept is not None}
        return GraphRun(
            written=written, cycles=cycles, node_steps=node_steps,
            stream_tokens={s: ch.produced for s, ch in self.channels.items()}, counters=counters,
            streams={s: tokens_of(ch) for s, ch in kept.items()} if kept else None,
            stream_times={s: times_of(ch) for s, ch in kept.items()} if kept else None,
            max_occupancy=occupancy, channel_depth=self.depth)


class Source(Runner):
    """A stream given whole (`apply`'s inputs), handed to its channel as room allows."""

    def __init__(self, stream: Stream, arr, ch: Channel, engine):
        self.id, self.kind, self.params, self.node = stream.node, "source", {}, None
        self.arr, self.next, self.engine, self.tile = arr, 0, engine, None
        self.in_ch, self.readers, self.out_ch, self.ins, self.outs = [], [], [ch], (), ("out",)
        self._reader_objects = []
        self.S = np.zeros(16, dtype=np.int64)
        self.done, self.status, self.failed = False, 0, False
        self.waiting, self.seen, self.rooms = 0, 0, 0

    def call(self) -> int:
        ch = self.out_ch[0]
        ch.compact()
        n = min(len(self.arr) - self.next, ch.capacity - ch.count)
        if n > 0:
            a, lo = self.arr, self.next
            tiles = None if a.tiles is None else a.tiles[lo:lo + n]
            ch.append(a.kind[lo:lo + n], a.data[lo:lo + n], a.sent[lo:lo + n], tiles)
            self.next += n
            self.S[STEPS] += n
        return DONE if self.next == len(self.arr) else WAIT_OUT

    def counters(self) -> dict:
        return {}


def _kept(ch: Channel):
    parts = ch.kept or []
    if not parts:
        return np.zeros(0, np.int8), np.zeros(0, ch.dtype), np.zeros(0, np.int64), None
    kind = np.concatenate([p[0] for p in parts])
    data = np.concatenate([p[1] for p in parts])
    sent = np.concatenate([p[2] for p in parts])
    tiles = np.concatenate([p[3] for p in parts]) if ch.tile_shape is not None else None
    return kind, data, sent, tiles


def tokens_of(ch: Channel) -> list:
    """Every token a channel carried (kept), as the oracle's tokens."""
    kind, data, _, tiles = _kept(ch)
    return token_list(kind, data, tiles)


def times_of(ch: Channel) -> list:
    """Visible times of every token a channel carried (kept)."""
    return (_kept(ch)[2] + ch.lat).tolist()


__all__ = ["Engine", "KernelFailed", "Source", "chunk_for", "tokens_of", "times_of"]
