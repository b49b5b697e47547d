"""Timing with bounded channels: back-pressure, and deadlock detection instead of a hang.

What each node computes does not depend on timing, so a run with unbounded channels fixes every
node's sequence of steps (what each step reads, consumes and emits). This module replays those
steps with channels of limited depth: a step that emits the j-th token of a channel waits until
the consumer has taken token j - depth. When no node can take its next step, the graph is
deadlocked and `Deadlock` names the blocked nodes and the full and empty channels.

A run with unbounded channels (either engine's) settles most cases at no cost: a bounded step waits
only where the token it emits would find `depth` tokens still waiting, so when no channel of the
unbounded run ever held more than its depth (`GraphRun.max_occupancy`: sent(j) >= taken(j - depth)
for every token j), the unbounded times already meet every bound, they are the least times that
do, and nothing deadlocks (`fits_unbounded`). Only a graph whose channels would overflow is
replayed here, on the oracle's step log (a Python loop per step: hundreds of times slower than the
fast engine). With the memory model on (`HwConfig.hbm`) the replay is always taken, because it
counts no memory stalls while the unbounded run does.

    >>> from fuseflow.sam.graph import SamGraph
    >>> g = SamGraph("chain"); r = g.add("root")
    >>> s = g.add("scan", {"tensor": "", "level": 0, "format": "dense", "dim": 4}, ref=r.out("ref"))
    >>> _ = g.add("level_write", {"tensor": "o", "level": 0, "format": "dense", "dim": 4}, crd=s.out("crd"))
    >>> bounded_cycles(g, {}, depth=1) >= bounded_cycles(g, {}, depth=None)
    True
"""
from __future__ import annotations

from ..errors import FuseflowError
from ..sam.graph import SamGraph, Stream
from .hw import HwConfig
from .oracle import WRITERS, GraphRun, run_graph


class Deadlock(FuseflowError):
    """The graph cannot make progress with the given channel depths."""

    def __init__(self, time: int, blocked: list[str], full: list[str], empty: list[str]):
        self.time, self.blocked, self.full, self.empty = time, blocked, full, empty
        super().__init__(f"deadlock at cycle {time}: {len(blocked)} nodes blocked "
                         f"({'; '.join(blocked[:6])}{' ...' if len(blocked) > 6 else ''}); "
                         f"full channels: {', '.join(full[:8]) or 'none'}; "
                         f"empty channels: {', '.join(empty[:8]) or 'none'}",
                         None, "deepen the full channels (e.g. the ones buffering a softmax row)")


def fits_unbounded(unbounded: GraphRun, depth: int | dict, hw: HwConfig) -> bool:
    """Whether the bounded run with `depth` has the unbounded run's times: no channel of it ever
    held more tokens than its depth (and the memory model is off, see the module docstring).

    >>> run = GraphRun(written={}, cycles=7, node_steps={}, stream_tokens={}, counters={},
    ...                max_occupancy={Stream(0, "ref"): 1, Stream(1, "crd"): 3})
    >>> fits_unbounded(run, 3, HwConfig()), fits_unbounded(run, 2, HwConfig())
    (True, False)
    >>> fits_unbounded(run, {Stream(1, "crd"): 4}, HwConfig())  # streams not named: unbounded
    True
    """
    if hw.hbm or unbounded.max_occupancy is None or unbounded.channel_depth is not None:
        return False
    for stream, most in unbounded.max_occupancy.items():
        limit = depth.get(stream) if isinstance(depth, dict) else depth
        if limit is not None and most > limit:
            return False
    return True


def bounded_cycles(graph: SamGraph, tensors: dict, depth: int | dict | None, hw: HwConfig | None = None,
                   unbounded: GraphRun | None = None) -> int:
    """Cycle count with every channel holding at most `depth` tokens (a dict maps streams to depths;
    None means unbounded). Raises Deadlock. `unbounded`: a run of the same graph on the same
    tensors, whose cycles are the answer when it ran with these bounds already (the fast engine,
    `GraphRun.channel_depth`) or ran unbounded and fits them (`fits_unbounded`)."""
    hw = hw or HwConfig()
    if unbounded is not None and depth is not None and unbounded.channel_depth is not None:
        if unbounded.channel_depth == depth and not hw.hbm:
            return unbounded.cycles
        unbounded = None
    if unbounded is not None and (depth is None or fits_unbounded(unbounded, depth, hw)):
        return unbounded.cycles
    run = run_graph(graph, tensors, hw, record_steps=True)
    if depth is None:
        return run.cycles
    return replay(graph, run, depth, hw)


def replay(graph: SamGraph, run: GraphRun, depth: int | dict, hw: HwConfig | None = None) -> int:
    """The cycles of the oracle's step log `run` (`run_graph(..., record_steps=True)`) replayed
    with bounded channels (`depth` as for `bounded_cycles`). Raises Deadlock."""
    hw = hw or HwConfig()
    consumer: dict[Stream, tuple[int, str]] = {}
    for node in graph.nodes:
        for port, stream in node.inputs.items():
            consumer[stream] = (node.id, port)

    def cap(stream: Stream) -> int | None:
        return depth.get(stream) if isinstance(depth, dict) else depth

    sent: dict[Stream, list[int]] = {s: [] for s in consumer}  # send times of emitted tokens
    taken: dict[Stream, list[int]] = {s: [] for s in consumer}  # consume times
    nxt = {n.id: 0 for n in graph.nodes}
    last: dict[int, int | None] = {n.id: None for n in graph.nodes}
    finished = 0
    cycles = 0
    timing = {n.id: hw.timing(n.kind, n.params) for n in graph.nodes}
    lat = {k: t[0] for k, t in timing.items()}
    total = len(graph.nodes)
    while finished < total:
        progressed = False
        for node in graph.nodes:
            log = run.step_log[node.id]
            while nxt[node.id] < len(log):
                reads, pops, emits = log[nxt[node.id]]
                ready = 0 if last[node.id] is None else last[node.id] + timing[node.id][1]
                blocked = False
                for port, index in reads:
                    stream = node.inputs[port]
                    if index >= len(sent[stream]):
                        blocked = True
                        break
                    ready = max(ready, sent[stream][index] + lat[stream.node])
                if not blocked:
                    for port, index in emits:
                        stream = Stream(node.id, port)
                        limit = cap(stream) if stream in consumer else None
                        if limit is not None and index >= limit:
                            freed = taken[stream]
                            if index - limit >= len(freed):
                                blocked = True
                                break
                            ready = max(ready, freed[index - limit])
                if blocked:
                    break
                for port, count in pops:
                    taken[node.inputs[port]].extend([ready] * count)
                for port, _ in emits:
                    stream = Stream(node.id, port)
                    if stream in sent:
                        sent[stream].append(ready)
                last[node.id] = ready
                nxt[node.id] += 1
                progressed = True
                if nxt[node.id] == len(log):
                    finished += 1
                    if node.kind in WRITERS:
                        cycles = max(cycles, ready)
        if not progressed and finished < total:
            raise _deadlock(graph, run, nxt, last, sent, taken, consumer, cap)
    return cycles


def _deadlock(graph, run, nxt, last, sent, taken, consumer, cap) -> Deadlock:
    blocked, full, empty = [], set(), set()
    for node in graph.nodes:
        log = run.step_log[node.id]
        if nxt[node.id] >= len(log):
            continue
        reads, _, emits = log[nxt[node.id]]
        waits = []
        for port, index in reads:
            stream = node.inputs[port]
            if index >= len(sent[stream]):
                waits.append(f"data on {port}")
                empty.add(f"{stream}->n{node.id}")
        for port, index in emits:
            stream = Stream(node.id, port)
            limit = cap(stream) if stream in consumer else None
            if limit is not None and index >= limit and index - limit >= len(taken[stream]):
                waits.append(f"space on {port}")
                full.add(f"{stream} (depth {limit})")
        if waits:
            blocked.append(f"n{node.id} {node.kind} waits for {' and '.join(waits)}")
    time = max((t for t in last.values() if t is not None), default=0)
    return Deadlock(time, blocked, sorted(full), sorted(empty))
