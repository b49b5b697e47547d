"""The fast engine: the oracle's semantics and cycle model on token *arrays*, with numba kernels.

`run_graph` returns exactly what `oracle.run_graph` returns (written tensors, cycles, node steps,
stream lengths, counters, channel occupancy and, with `keep_streams`, every token and visible
time); the oracle's module docstring is the specification and every kernel mirrors the
oracle's step loop of its primitive, read for read.

This module runs graphs and dispatches each node to its driver (`DRIVERS`). Kernels and drivers
live by primitive family: `fast_read` (root, scan, locate, array), `fast_repeat` (repsig,
repeat), `fast_join` (intersect, union), `fast_alu`, `fast_reduce`, `fast_spacc` (spacc,
spacc2), `fast_drop` (crd_drop), `fast_write` (level_write, value_write) and `fast_lanes`
(broadcast, fork, join), on the streams of `fast_stream` and the plumbing of `fast_core`.

A stream is an `Arr`: three arrays of equal length, `kind` (int8: `VAL`, `STOP`, `EMPTY`,
`DONE`, `REPEAT`), `data` (int64 for coordinates, references and repeat signals, float64 for
values; the level of a `Stop`; anything for `N`, `D`, `R`) and `sent` (int64 step time at which
the producer emitted the token), plus the producer's latency `lat` (visible time = sent + lat).
Nodes run in id order (the graph is a DAG, channels are unbounded); each kernel walks its
inputs once and records the step time at which it consumes every input token, which gives the
channel occupancy. Arrays are never modified once built, so streams share them wherever they
coincide: a node that consumes one token and emits one per step sends at the times it
consumes, a broadcast's outputs are its input's tokens, a scanner's crd and ref share times.

The memory model (`HwConfig.hbm`) is mirrored step for step. Malformed inputs: a kernel that
meets anything the oracle would reject stops with an error code and the node is re-run by the
oracle, which raises its exact exception (if it does not, the engine raises AssertionError: a
bug here). Inputs of an unexpected type (a float stream where coordinates are expected, odd
storage), an ALU op, reduction or primitive without a kernel, and `record_steps` (the per-step
log of bounded channels) run on the oracle too. `apply` reads a token list as float data if any
`Val` holds a float, so a hand-written stream mixing ints and floats comes back with floats.

Tile-valued streams (blocked graphs) carry tile ids into a per-stream table (`Arr.tiles`); the
kernels move the ids and `sim.fast_tiles` computes the values of tile nodes (see there).
Pass-through nodes (repeat, joiners, broadcast, fork) hand their input's table on; join
concatenates its lanes' tables.

    >>> from fuseflow.sim import oracle
    >>> run = apply("reduce", {"val": "1 2 S0 S0 4 S0 S1 D"})
    >>> oracle.format_tokens(run.outs["val"]), run.steps, run.last_step
    ('3 0 4 S0 D', 8, 7)
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..sam.graph import GraphError, SamGraph, Stream
from ..sam.primitives import PRIMITIVES
from . import oracle, oracle_node
from .fast_alu import ALU_CODES, _alu  # ALU_CODES, REDUCE_CODES: re-exported
from .fast_core import _NeedOracle, _Node, _Res
from .fast_drop import _crd_drop
from .fast_join import _joiner
from .fast_lanes import _broadcast, _fork, _join
from .fast_read import _array, _locate, _root, _scan
from .fast_reduce import REDUCE_CODES, _reduce
from .fast_repeat import _repeat, _repsig
from .fast_spacc import _spacc, _spacc2
from .fast_stream import DONE, EMPTY, REPEAT, STOP, VAL, Arr, from_tokens, to_tokens
from .fast_write import _level_write, _value_write
from .hw import HwConfig
from .oracle import GraphRun, NodeRun
from .storage import StoredTensor, WrittenTensor

__all__ = ["run_graph", "apply", "Arr", "from_tokens", "to_tokens", "VAL", "STOP", "EMPTY", "DONE",
           "REPEAT"]

# an op, reduction or primitive the oracle knows and ALU_CODES, REDUCE_CODES or DRIVERS do not
# runs on the oracle
DRIVERS = {
    "root": _root, "scan": _scan, "locate": _locate, "repsig": _repsig, "repeat": _repeat,
    "intersect": lambda n: _joiner(n, False), "union": lambda n: _joiner(n, True),
    "array": _array, "alu": _alu, "reduce": _reduce, "spacc": _spacc, "spacc2": _spacc2,
    "crd_drop": _crd_drop, "level_write": _level_write, "value_write": _value_write,
    "broadcast": _broadcast, "fork": _fork, "join": _join,
}


@njit(cache=True)
def _occupancy(sent, consumed):
    """oracle.channel_occupancy."""
    best = 0
    j = 0
    n = consumed.shape[0]
    for k in range(sent.shape[0]):
        t = sent[k]
        while j < n and consumed[j] <= t:
            j += 1
        if k + 1 - j > best:
            best = k + 1 - j
    return best


def _by_oracle(n: _Node, names: dict, strict: bool) -> _Res:
    """Run the node with the oracle on token lists (raises what the oracle raises)."""
    inputs = {p: (to_tokens(a), a.time.tolist()) for p, a in n.ins.items()}
    run = oracle_node._run_node(n.id, n.kind, n.params, n.arity, inputs, n.tensors, n.hw, names)
    if strict:
        raise AssertionError(f"fast engine: n{n.id} {n.kind} found malformed input the oracle accepts "
                             "(a bug in fuseflow.sim.fast)")
    outs = {p: from_tokens(toks, run.times[p], lat=n.lat) for p, toks in run.outs.items()}
    cons = {p: np.asarray(v, dtype=np.int64) for p, v in run.consumed.items()}
    return _Res(outs, run.steps, run.last_step, dict(run.counters), cons, run.written_level, run.written_vals)


def _tables_passed(n: _Node, res: _Res) -> None:
    """Outputs of pass-through nodes carry their input's tile table."""
    if n.kind in ("repeat", "broadcast", "fork"):
        source = n.ins.get("in")
        for arr in res.outs.values():
            arr.tiles = source.tiles if source is not None else None
    elif n.kind in ("intersect", "union"):
        for port, arr in res.outs.items():
            if port.startswith("pay") and port in n.ins:
                arr.tiles = n.ins[port].tiles


def _run_node(n: _Node, names: dict) -> _Res:
    try:
        if n.kind not in DRIVERS:
            raise _NeedOracle(False)
        res = DRIVERS[n.kind](n)
        _tables_passed(n, res)
        return res
    except _NeedOracle as need:
        return _by_oracle(n, names, need.strict)


# -- public API --------------------------------------------------------------------------------------
def run_graph(graph: SamGraph, tensors: dict[str, StoredTensor], hw: HwConfig | None = None,
              keep_streams: bool = False, record_steps: bool = False) -> GraphRun:
    """Simulate `graph` exactly as `oracle.run_graph` does, on token arrays. A per-step log
    (`record_steps`, for bounded channels) is the oracle's business: it runs the oracle."""
    if record_steps:
        return oracle.run_graph(graph, tensors, hw, keep_streams, record_steps=True)
    hw = hw or HwConfig()
    nodes = graph.nodes
    remaining: dict[Stream, int] = {}  # consumers still to run, to free streams early
    for node in nodes:
        for stream in node.inputs.values():
            remaining[stream] = remaining.get(stream, 0) + 1
    produced: dict[Stream, Arr] = {}
    lengths: dict[Stream, int] = {}
    written: dict[str, WrittenTensor] = {}
    node_steps: dict[int, int] = {}
    counters = {"flops": 0, "mem_reads": 0, "mem_writes": 0}
    occupancy: dict[Stream, int] = {}
    cache: dict = {}
    kept: dict[Stream, Arr] = {}
    cycles = 0
    for node in nodes:
        if node.kind not in oracle.IMPLS:
            raise GraphError(f"n{node.id}: unknown primitive {node.kind!r}")
        ins, names = {}, {}
        for port, stream in node.inputs.items():
            if stream not in produced:
                raise GraphError(f"n{node.id} {node.kind}: input {port} reads {stream}, which is not "
                                 "an output of an earlier node")
            ins[port], names[port] = produced[stream], str(stream)
        res = _run_node(_Node(node.id, node.kind, node.params, node.arity, ins, tensors, hw, cache), names)
        for port in PRIMITIVES[node.kind].ports(node.arity)[1]:
            s = Stream(node.id, port)
            arr = res.outs[port]
            produced[s] = arr
            lengths[s] = len(arr)
            if keep_streams:
                kept[s] = arr
        node_steps[node.id] = int(res.steps)
        for port, stream in node.inputs.items():
            occupancy[stream] = int(_occupancy(produced[stream].sent, res.cons[port]))
        for key, value in res.counters.items():
            counters[key] += value
        if node.kind in oracle.WRITERS:
            cycles = max(cycles, res.last)
            out = written.setdefault(node.params["tensor"], WrittenTensor())
            if node.kind == "level_write":
                k = node.params.get("level", 0)
                if k in out.levels:
                    raise GraphError(f"n{node.id}: level {k} of {node.params['tensor']} is written twice")
                out.levels[k] = res.level
            else:
                if out.vals is not None:
                    raise GraphError(f"n{node.id}: values of {node.params['tensor']} are written twice")
                out.vals = res.vals
        del res
        for stream in node.inputs.values():
            remaining[stream] -= 1
            if remaining[stream] == 0:
                del produced[stream]
    return GraphRun(
        written=written, cycles=int(cycles), node_steps=node_steps, stream_tokens=lengths, counters=counters,
        streams={s: to_tokens(a) for s, a in kept.items()} if keep_streams else None,
        stream_times={s: a.time.tolist() for s, a in kept.items()} if keep_streams else None,
        max_occupancy=occupancy)


def apply(kind: str, inputs: dict, params: dict | None = None, *, tensors: dict | None = None,
          arity: int = 0, hw: HwConfig | None = None) -> NodeRun:
    """`oracle.apply` on the fast engine: one primitive on token lists, text or (tokens, visible
    times), or `Arr`s."""
    hw = hw or HwConfig()
    ins = {}
    for port, value in inputs.items():
        if isinstance(value, Arr):
            ins[port] = value
        elif isinstance(value, tuple):
            ins[port] = from_tokens(value[0], value[1])
        else:
            ins[port] = from_tokens(value)
    n = _Node(0, kind, dict(params or {}), arity, ins, tensors or {}, hw, {})
    res = _run_node(n, {p: p for p in ins})
    return NodeRun({p: to_tokens(a) for p, a in res.outs.items()},
                   {p: a.time.tolist() for p, a in res.outs.items()}, int(res.steps), res.last,
                   dict(res.counters), res.level, res.vals,
                   {p: np.asarray(c)[:len(ins[p])].tolist() for p, c in res.cons.items()})
