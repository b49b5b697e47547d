"""The oracle simulator: a plain per-token implementation of every SAM primitive with a cycle model.

This is the reference that faster engines must match token for token, step for step and cycle for
cycle, so every primitive is written as a simple loop of *steps*. In each step a node reads (peeks
at or consumes) some input heads and emits zero or more tokens.

Cycle model (unbounded channels). Step `s` of a node happens at
`t_s = max(t_{s-1} + II, visible time of every input token the step reads)` (with `t_{-1}` taken
so that `t_0 = max(0, ...)`); a token emitted at step time `t` becomes visible to its consumers at
`t + latency(kind)` (see `HwConfig`). Since the graph is a DAG and channels are unbounded, nodes
run one after another in id order, each producing its whole output token lists with visible
times. `GraphRun.cycles` is the latest step time at which a writer (level_write or value_write)
consumes `D` (0 if the graph has no writer).

Steps of each primitive ("reads" = the heads whose visible times count for the step):

* root: 2 steps: emit `0`; emit `D`.
* scan: one step per emitted token (crd and ref are emitted together). For a `Val(r)` fiber with
  m coordinates: m+1 steps, the first consumes `r` and emits the first coordinate (or `S0` if
  m = 0), the last emits `S0`; the steps after the first read nothing. `N` on a dense level is
  the full fiber with `N` positions (dim+1 steps), on a compressed level one step emitting `S0`.
  `Sn`, `D`: one step consuming it and emitting `S(n+1)`, `D`.
* locate, alu: one step per aligned input tuple, consuming one token of every input.
* repsig, array, broadcast, fork, level_write, value_write: one step per input token.
* repeat: one step per signal token: consumes it, reads the head of `in` (consuming it on `Sn`/`D`).
* intersect, union: one step per loop iteration; it reads every crd head and consumes the
  payload heads of the inputs it advances. Intersect: all heads `D` -> consume all, emit `D`;
  all heads the same `Sn` -> consume all, emit `Sn`; all heads equal coordinates -> consume all,
  emit the coordinate and the payloads; some head a stop -> skip (consume, no output) every input
  whose head is a coordinate; otherwise skip every input whose head is the smallest coordinate.
  Union: all heads stops/`D` as for intersect; otherwise emit the smallest head coordinate m,
  inputs whose head is m consume and emit their payload, the others (bigger coordinate or a stop)
  emit `N`.
* reduce: one step per input token (`S0` emits the result, `Sn` emits `S(n-1)`, `D` emits `D`).
* spacc: one step per inner (crd, val) pair accumulated (reads the outer head too); one per outer
  coordinate (reads its closing inner `S0`/val `S0` and consumes all three); at an outer `S0`, one
  step per map entry, in coordinate order (peeks the three stop heads, emits the entry); then one
  step per outer stop/`D` consuming the three heads and emitting it.
* crd_drop: one step per inner token (reads the outer head too). Inner coordinate: emit it, and
  on the first one of a fiber also emit the outer coordinate. Inner `S0`: consume the outer
  coordinate; emit `S0` unless the fiber was empty (then both are dropped). Inner `S(n+1)` with
  outer `Sn`, and `D` with `D`: consume and emit both.
* join: one step per emitted token (see below).

Counters: `flops` = ALU results + reduce/spacc accumulations of `Val`/`N` tokens; `mem_reads` =
compressed-scan seg reads (2 per `Val` ref) + compressed-scan crd reads (1 per coordinate) +
array value reads (1 per `Val` ref); `mem_writes` = compressed level_write crd writes (1 per
`Val`) and seg writes (1 per `S0`) + value_write writes (1 per `Val`/`N`).

Tile-valued nodes (a `tile` parameter, see `sim.tiles`): values are `Tile`s (numpy arrays over
the node's named axes); `N` is a tile of zeros (or of the array's fill) for ALUs, reducers and
writers. Counters count tile elements so that blocked and scalar runs compare: an elementwise
ALU result of E elements is E FLOPs, a contraction (tile matmul) 2B³ - B² for BxB, a
reducer E FLOPs per accumulated tile, an array read or value write E words. Their latency and
initiation interval are the block-mode costs of `HwConfig.timing`; every other node keeps its
scalar timing (each node has one II, used between all of its steps).

Spec choices (where primitives.py is silent or ambiguous):

* A dense level_write stores nothing, so it counts no memory writes (it only checks that each
  fiber is exactly 0..dim-1); crd and seg writes are counted for compressed levels only.
* Dense scans read no memory (coordinates and positions are computed); locate reads none either.
* `Empty` is 0.0 for ALUs and reducers; so `max`-reduce of `N` and negatives gives 0. An empty
  fiber reduces to the identity: 0 (sum), -inf (max), +inf (min). spacc starts an entry at the
  identity, so its first value is stored as is.
* ALU arithmetic is IEEE float64 as numpy does it: x/0 is +-inf (0/0 nan), exp overflow is inf,
  sqrt of a negative is nan, rsqrt(x) = 1/sqrt(x), max/min propagate nan. A `scalar` is inserted
  as operand `scalar_pos` for any op but `const` (which needs a scalar and emits it per element);
  the operand count must then fit the op (graph error otherwise).
* fork deals `Val`/`N` round-robin with one lane counter for the whole stream (it does not reset
  at stops); stops and `D` go to every lane. join (param `depth`, default 0) is its exact inverse:
  an *element* is one `Val`/`N` token when depth = 0, or, when each dealt element grew `depth`
  levels in the lanes, the tokens up to and including its closing `S(depth-1)`. join keeps the
  same lane counter: if lane `idx`'s head belongs to an element (a `Val`/`N` or a `Sn` with
  n < depth) it consumes and emits it, moving to the next lane after the element's last token;
  if it is a `Sn` with n >= depth or `D`, every lane must hold that same head: consume all,
  emit it once. So fork -> join is the identity (depth 0).
* crd_drop only edits its two streams: streams below `inner` keep the (now orphaned) empty fibers
  of dropped coordinates. Chains (drop at level k+1 of k, then at level k of k-1) are fine for the
  streams they are given.
* Intersect/union crd streams must not hold `N`; payload heads must be aligned with their crd
  (element with coordinate, same stop with stop, `D` with `D`).
* Every input must end with `D` and be fully consumed; misaligned or malformed streams raise
  `MisalignedStreams` (an AssertionError) naming the node and the offending tokens.

This package runs graphs. One node runs in `oracle.node` (`IMPLS`, `apply`), in the context of
`oracle.context`; the primitives live by family, in modules named as the fast engine's
(`sim.fast`): `read` (root, scan, locate, array), `repeat` (repsig, repeat), `join` (intersect,
union), `alu`, `reduce`, `spacc` (spacc, spacc2), `drop` (crd_drop), `write` (level_write,
value_write) and `lanes` (broadcast, fork, join), with the arithmetic of `arith`; `fns` has them
as functions on token lists (re-exported here).

    >>> format_tokens(scan(parse_tokens("0 1 S0 D"), seg=[0, 2, 3], crd=[5, 7, 6])[0])
    '5 7 S0 6 S0 S1 D'
    >>> format_tokens(reduce("1 2 S0 S0 4 S0 S1 D", "max"))
    '2 -inf 4 S0 D'
"""
from __future__ import annotations

from dataclasses import dataclass

from ...sam.graph import GraphError, SamGraph, Stream
from ..hw import HwConfig
from ..storage import StoredTensor, WrittenTensor
from ..tokens import Token, format_tokens, parse_tokens
from .arith import ALU_OPS, INF, NAN, REDUCERS  # noqa: F401 - INF, NAN: re-exported
from .context import MisalignedStreams
from .fns import (
    alu,
    array,
    broadcast,
    crd_drop,
    fork,
    intersect,
    join,
    level_write,
    locate,
    reduce,
    repeat,
    repsig,
    root,
    scan,
    spacc,
    union,
    value_write,
)
from .node import IMPLS, NodeRun, _run_node, apply

__all__ = ["run_graph", "GraphRun", "NodeRun", "apply", "MisalignedStreams", "ALU_OPS", "REDUCERS",
           "root", "scan", "locate", "repsig", "repeat", "intersect", "union", "array", "alu", "reduce",
           "spacc", "crd_drop", "level_write", "value_write", "broadcast", "fork", "join",
           "format_tokens", "parse_tokens"]


WRITERS = ("level_write", "value_write")


@dataclass
class GraphRun:
    written: dict[str, WrittenTensor]
    cycles: int
    node_steps: dict[int, int]
    stream_tokens: dict[Stream, int]
    counters: dict[str, int]
    streams: dict[Stream, list[Token]] | None = None
    stream_times: dict[Stream, list[int]] | None = None
    max_occupancy: dict[Stream, int] | None = None  # most tokens waiting in each channel at once
    step_log: dict[int, list] | None = None  # per node, what each step read, consumed and emitted
    channel_depth: int | dict | None = None  # the bound of the run's channels (None: unbounded; see sim.bounded)


def channel_occupancy(sent: list[int], consumed: list[int]) -> int:
    """Most tokens in a channel at once: a token occupies it from its send time until the step
    that consumes it (a consume and a send at the same time free the slot first)."""
    best, j, n = 0, 0, len(consumed)
    for k, t in enumerate(sent):
        while j < n and consumed[j] <= t:
            j += 1
        best = max(best, k + 1 - j)
    return best


def run_graph(graph: SamGraph, tensors: dict[str, StoredTensor], hw: HwConfig | None = None,
              keep_streams: bool = False, record_steps: bool = False, *, budget=None,
              on_events=None) -> GraphRun:
    """Simulate `graph` on stored input tensors; see the module docstring for the cycle model.
    Takes the fast engine's options, so that both engines are called alike: `on_events(done)`
    after each node with the token events so far; `budget` is not consulted (the oracle holds
    whole streams in lists, for the small cases it checks, and sizes nothing ahead)."""
    del budget
    hw = hw or HwConfig()
    produced: dict[Stream, tuple[list, list]] = {}
    written: dict[str, WrittenTensor] = {}
    node_steps: dict[int, int] = {}
    counters = {"flops": 0, "mem_reads": 0, "mem_writes": 0}
    occupancy: dict[Stream, int] = {}
    step_log: dict[int, list] = {}
    cycles = 0
    for node in graph.nodes:
        if node.kind not in IMPLS:
            raise GraphError(f"n{node.id}: unknown primitive {node.kind!r}")
        inputs, names = {}, {}
        for port, stream in node.inputs.items():
            if stream not in produced:
                raise GraphError(f"n{node.id} {node.kind}: input {port} reads {stream}, which is not "
                                 "an output of an earlier node")
            inputs[port], names[port] = produced[stream], str(stream)
        run = _run_node(node.id, node.kind, node.params, node.arity, inputs, tensors, hw, names, record_steps)
        if record_steps:
            step_log[node.id] = run.log
        for port in run.outs:
            produced[Stream(node.id, port)] = (run.outs[port], run.times[port])
        node_steps[node.id] = run.steps
        if on_events is not None:
            on_events(sum(len(toks) for toks, _ in produced.values()))
        for port, stream in node.inputs.items():
            producer = graph.nodes[stream.node]
            lat = hw.timing(producer.kind, producer.params)[0]
            sent = [t - lat for t in produced[stream][1]]
            occupancy[stream] = channel_occupancy(sent, run.consumed[port])
        for key, value in run.counters.items():
            counters[key] += value
        if node.kind in WRITERS:
            cycles = max(cycles, run.last_step)
            out = written.setdefault(node.params["tensor"], WrittenTensor())
            if node.kind == "level_write":
                k = node.params.get("level", 0)
                if k in out.levels:
                    raise GraphError(f"n{node.id}: level {k} of {node.params['tensor']} is written twice")
                out.levels[k] = run.written_level
            else:
                if out.vals is not None:
                    raise GraphError(f"n{node.id}: values of {node.params['tensor']} are written twice")
                out.vals = run.written_vals
    return GraphRun(
        written=written, cycles=cycles, node_steps=node_steps,
        stream_tokens={s: len(toks) for s, (toks, _) in produced.items()}, counters=counters,
        streams={s: toks for s, (toks, _) in produced.items()} if keep_streams else None,
        stream_times={s: times for s, (_, times) in produced.items()} if keep_streams else None,
        max_occupancy=occupancy, step_log=step_log if record_steps else None)
