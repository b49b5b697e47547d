"""Bounded channels in the fast engine's driver (`Engine` extends `BoundedDriver`): the rounds of
visits and which nodes they check, lean visits and their merging of consumes, and deadlocks.

With `depth` (modelled FIFOs of that many tokens, `HwConfig.channel_depth`) every channel with a
reader is bounded (`Channel.bound`): a producer waits for its reader, times follow
`sim.bounded`'s rule, and a round in which nothing moves while only bounds hold nodes back is a
deadlock (`sim.bounded.Deadlock`, here with the blocked nodes named). That needs every node's
kernel to honour bounds (`Runner.backpressure`) and one reader per stream; otherwise the run is
unbounded (`GraphRun.channel_depth` None) and `sim.bounded` settles the bound from it. With
`first_unbounded` the run is unbounded but stops (`Overflow`) as soon as a channel held more
tokens than its bound: a run that never does has the bounded times (`sim.bounded.fits_unbounded`)
and costs no more than an unbounded one, while bounded channels move at most N tokens a visit.

Rounds serve every run: a visit marks the nodes whose readiness it may change (`dirty`), and a
round checks only those; with bounds, a waiting node is visited again once half a FIFO's worth
is there for it (`_batch`), and a node whose inputs are all bounded skips noting positions
before its calls (a lean visit, `_lean`), its consumes merged a quarter buffer at a time
(`_merge_bounded`). None of this changes timing.

    >>> from fuseflow.sam.graph import SamGraph
    >>> from fuseflow.sim.fast.engine import Engine
    >>> g = SamGraph("chain"); r = g.add("root")
    >>> s = g.add("scan", {"tensor": "", "level": 0, "format": "dense", "dim": 4}, ref=r.out("ref"))
    >>> _ = g.add("level_write", {"tensor": "o", "level": 0, "format": "dense", "dim": 4}, crd=s.out("crd"))
    >>> engine = Engine(g, {}, depth=1)
    >>> [r.lean for r in engine.runners]  # every input bounded, no tiles: lean visits
    [True, True, True]
    >>> run = engine.run()
    >>> run.channel_depth, run.cycles
    (1, 7)
"""
from __future__ import annotations

import numpy as np

from ...sam.graph import Stream
from ..bounded import Deadlock, bounded_cycles
from .channel import BASE, COUNT, CURSOR, FINAL
from .core import STEPS, WAIT_IN, WAIT_OUT, Runner, T
from .runners import TILES_ONLY_AFTER


class Overflow(Exception):
    """A run with `first_unbounded` met a channel holding more tokens than its bound."""


class BoundedDriver:
    """The rounds and bounded channels of `engine.Engine`'s driver. A mixin: it works on the
    engine's runners, channels and tables and calls its `_visit`, `_drained`, `_merge`,
    `_grow_channel` and `_grow_waiting`; it sets `depth` (None: unbounded), `overflow` (the
    bounds watched by a `first_unbounded` run) and `full_channels` (at a deadlock)."""

    def _apply_depth(self, depth: int | dict | None, first_unbounded: bool) -> None:
        """Readiness marking for every run; then, with `depth` and every node able to honour it,
        channels bounded (or, `first_unbounded`, watched for overflow)."""
        self.depth = self.overflow = None
        self.full_channels: set = set()  # bounded channels that were full when the graph deadlocked
        self._wire_neighbours()
        if depth is not None and self._boundable():
            if first_unbounded:
                self._watch(depth)
            else:
                self._bound(depth)
                for r in self.runners:
                    r.lean = self._lean(r)
                    for _, x, _, reader in r.in_rows if r.lean else ():
                        reader.unmerged = int(self.tables.RD[x, CURSOR])  # merged up to here
            self.depth = depth

    def _wire_neighbours(self) -> None:
        """`lean` off, `dirty` on, and `neighbours`: the runners a visit of each may make ready."""
        producer = {ch.index: r for r in self.runners for ch in r.out_ch}
        by_reader = {x: r for r in self.runners for x in r.readers}
        for r in self.runners:
            r.lean, r.dirty = False, True
            near = [producer[ch.index] for ch in r.in_ch if ch.index in producer]
            near += [by_reader[x.index] for ch in r.out_ch for x in ch.readers if x.index in by_reader]
            r.neighbours = list({id(n): n for n in near if n is not r}.values())

    def _boundable(self) -> bool:
        """Whether every node's kernel honours bounds and every stream has at most one reader."""
        return not self.whole and not getattr(self.hw, "hbm", False) and \
            all(r.backpressure for r in self.runners) and all(len(ch.readers) <= 1 for ch in self.channels.values())

    def _watch(self, depth: int | dict) -> None:
        """Run unbounded, but stop (Overflow) once a channel held more tokens than its bound."""
        self.overflow = np.full(self.tables.RD.shape[0], np.iinfo(np.int64).max, dtype=np.int64)
        for stream, ch in self.channels.items():
            n = depth.get(stream) if isinstance(depth, dict) else depth
            if n is not None:
                for reader in ch.readers:
                    self.overflow[reader.index] = n

    def _bound(self, depth: int | dict) -> None:
        """Bound every read channel to `depth` (a dict: per stream, others unbounded)."""
        for stream, ch in self.channels.items():
            n = depth.get(stream) if isinstance(depth, dict) else depth
            if not ch.readers or n is None:
                continue
            ch.bound(n)
            need = 1 << (2 * (n + 1) - 1).bit_length()  # room for the last n consume times and as many new tokens
            ch.limit = max(ch.limit, need)
            if ch.capacity < need:
                self._grow_channel(ch, self.runners[0], need)

    def _lean(self, r: Runner) -> bool:
        """Whether a visit of `r` may skip noting positions before its calls: every input is
        bounded (merged from the cursor of its last merge, `_merge_bounded`) and its `after` has
        nothing to do (no tiles), nor keeps or records anything."""
        idle = type(r).after is Runner.after or (
            type(r) in TILES_ONLY_AFTER and r.tile is None
            and all(ch.tile_shape is None for ch in (*r.in_ch, *r.out_ch)))
        return idle and not self.keeps and not self.record_consumed and all(ch.depth for ch in r.in_ch)

    def _round(self, live: list, batch: int) -> bool:
        """Visit the nodes that have more than `batch` new tokens (or the end) to read, or whose
        readers progressed by more than `batch`, since they stopped; True if any moved. Only the
        nodes marked `dirty` are checked: a visit marks the nodes whose readiness it may change
        (`Runner.neighbours`: the producers of its inputs, the readers of its outputs), so a node
        is checked when, and only when, a check could find it ready (the tables are read
        directly)."""
        item = self.tables.CH.item
        moved = False
        for r in live:
            if not r.dirty or r.done:  # nothing it waits on changed since it was last checked
                continue
            r.dirty = False
            status = r.status
            if status == WAIT_IN:
                c = r.wait_row
                if item(c, BASE) + item(c, COUNT) - r.seen <= batch and not item(c, FINAL):
                    continue
            elif status == WAIT_OUT and self._drained(r) - r.rooms <= batch:  # room comes from its readers
                continue
            moved |= self._visit(r)
        return moved

    def _batch(self) -> int:
        """With bounded channels (at most N tokens a visit), a waiting node is visited again once
        half a FIFO's worth is there for it (rounds that move nothing then visit every node that
        can move): fewer, fuller visits. Timing does not depend on when a node is visited."""
        if self.depth is None or self.overflow is not None:
            return 0
        depths = list(self.depth.values()) if isinstance(self.depth, dict) else [self.depth]
        return min(depths, default=0) // 2

    def _touch_all(self) -> None:
        """Mark every node for a readiness check in the next round (`_round`)."""
        for r in self.runners:
            r.dirty = True

    def _merge_bounded(self, r: Runner, finished: bool) -> None:
        """`count_consumed` of a lean runner (`_lean`): each input's consumes since its last merge
        (`Reader.unmerged`, the cursor then) are merged once they fill a quarter buffer."""
        CH, RD = self.tables.CH.item, self.tables.RD.item
        for c, x, ch, reader in r.in_rows:
            cursor = RD(x, CURSOR)
            start = reader.unmerged
            if cursor - start < ch.kind.shape[0] // 4 and not finished:
                continue
            base = CH(c, BASE)
            reader.synced = base + CH(c, COUNT)
            self._merge(r, c, x, ch, reader, start - base, finished)
            reader.unmerged = cursor

    def _deadlock(self) -> Exception:
        """The deadlock report, as `sim.bounded` words it: the time of the last step, each blocked
        node with what its next step waits for (data on an input nobody produced yet, space on a
        full bounded output), the full and the empty channels. Where a node's next step depends on
        a token not produced yet (`Runner.pending` None), the bounds are lifted and the nodes
        upstream of it run on until that token is there (timing no longer matters, values do)."""
        RD = self.tables.RD
        self.full_channels = {ch.index for ch in self.channels.values() if ch.depth and ch.bound_room() <= 0}
        produced = {ch.index: ch.produced for ch in self.channels.values()}
        cursors = RD[:, 0].copy()
        time = max((int(r.S[T]) for r in self.runners if r.node is not None and r.S[STEPS] > 0), default=0)
        blocked_nodes = [r for r in self.runners if r.node is not None and not r.done]
        steps = {r.id: r.pending() for r in blocked_nodes}
        unknown = [r for r in blocked_nodes if steps[r.id] is None]
        if unknown:
            for ch in self.channels.values():
                ch.unbound()
            for r in self.runners:
                for _, x, _, reader in r.in_rows if r.lean else ():
                    if reader.unmerged == RD[x, CURSOR]:  # nothing consumed since the last merge
                        reader.unmerged = -1
                r.lean = False
            frozen = {r.id for r in unknown}
            for r in unknown:  # upstream first: what it waits on comes from nodes already known
                steps[r.id] = self._advance(r, frozen)
                if steps[r.id] is None:
                    return self._replayed_deadlock()
                frozen.discard(r.id)
        blocked, full, empty = [], set(), set()
        for r in blocked_nodes:
            reads, emits = steps[r.id]
            waits = []
            for port in sorted(reads):
                i = r.ins.index(port)
                if cursors[r.readers[i]] >= produced[r.in_ch[i].index]:
                    waits.append(f"data on {port}")
                    empty.add(f"{r.node.inputs[port]}->n{r.id}")
            for port in emits:
                if r.full(port):
                    waits.append(f"space on {port}")
                    full.add(f"{Stream(r.id, port)} (depth {r.out_ch[r.outs.index(port)].limit_depth})")
            if not waits:  # cannot be: the node would have moved
                return self._replayed_deadlock()
            blocked.append(f"n{r.id} {r.kind} waits for {' and '.join(waits)}")
        return Deadlock(time, blocked, sorted(full), sorted(empty))

    def _advance(self, target: Runner, frozen: set) -> tuple | None:
        """Run the nodes not frozen (bounds lifted) until `target.pending()` is known; None if
        the graph stops first."""
        while True:
            step = target.pending()
            if step is not None:
                return step
            self._touch_all()
            moved = self._round([r for r in self.runners if r.id not in frozen], 0)
            if not moved and not self._grow_waiting():
                return None

    def _replayed_deadlock(self) -> Exception:
        """The report from the oracle's replay (`sim.bounded`), which must deadlock too."""
        bounded_cycles(self.graph, self.tensors, self.depth, self.hw)
        return AssertionError("fast engine: bounded channels deadlock where the oracle's replay does not")
