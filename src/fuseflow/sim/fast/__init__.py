"""The fast engine: the oracle's semantics and cycle model, streamed through bounded buffers by
numba kernels.

`run_graph` returns exactly what `oracle.run_graph` returns (written tensors, cycles, node steps,
stream lengths, counters, channel occupancy and, with `keep_streams`, every token and visible
time); the oracle's docstring is the specification, and every kernel mirrors the oracle's step
loop of its primitive, read for read. Unlike the oracle, it never holds a whole stream: each
channel buffers `chunk` tokens (see `engine`), so memory follows the buffers and the
accumulators' live state, and the results are the same whatever the chunk size.

Kernels and runners live by primitive family, in modules named as the oracle's: `read` (root,
scan, locate, array), `repeat` (repsig, repeat), `join` (intersect, union), `alu`, `reduce`,
`spacc` (spacc, spacc2; the order-2 tables in `spacc_tables`), `drop` (crd_drop), `write`
(level_write, value_write) and `lanes` (broadcast, fork, join); `core` has what they share,
`channel` the buffers, `engine` the graph driver (`bounded_driver` its rounds and bounded
channels), `tiles` the values of tile streams and `by_oracle` the way back to the oracle for
what the kernels do not handle. Malformed input (which the kernels detect but do not describe)
is run again on the oracle, which raises its exact exception.

    >>> from fuseflow.sim import oracle
    >>> run = apply("reduce", {"val": "1 2 S0 S0 4 S0 S1 D"}, chunk=1)
    >>> oracle.format_tokens(run.outs["val"]), run.steps, run.last_step
    ('3 0 4 S0 D', 8, 7)
"""
from __future__ import annotations

from . import kernel_cache  # noqa: F401  (first: numba's cache keyed on the kernels' dependencies)

# isort: split
import numpy as np

from ...sam.graph import Node, SamGraph, Stream
from ..hw import HwConfig
from ..oracle import GraphRun, MisalignedStreams, NodeRun
from ..oracle import run_graph as oracle_run_graph
from ..oracle.node import _run_node
from .alu import ALU_CODES
from .bounded_driver import Overflow
from .engine import Engine, KernelFailed, times_of, tokens_of
from .reduce import REDUCE_CODES
from .runners import RUNNERS
from .stream import DONE, EMPTY, REPEAT, STOP, VAL, Arr, from_tokens, to_tokens

__all__ = ["run_graph", "apply", "Arr", "from_tokens", "to_tokens", "VAL", "STOP", "EMPTY", "DONE", "REPEAT",
           "RUNNERS", "ALU_CODES", "REDUCE_CODES"]

ORACLE_RERUN_TOKENS = 5_000_000  # malformed input in a graph this small is re-run on the oracle for its message


def run_graph(graph: SamGraph, tensors: dict, hw: HwConfig | None = None, keep_streams: bool = False,
              record_steps: bool = False, *, chunk=None, budget=None, on_events=None,
              depth: int | dict | None = None, first_unbounded: bool = True) -> GraphRun:
    """Simulate `graph` exactly as `oracle.run_graph` does, streaming through buffers of `chunk`
    tokens (default: sized to the graph; see `engine.chunk_for`). A per-step log
    (`record_steps`, for bounded channels) is the oracle's business: it runs the oracle.
    With `depth` (default `hw.channel_depth`) channels are bounded where every node's kernel
    allows (`GraphRun.channel_depth` says whether they were; `sim.bounded` settles the rest):
    first unbounded, stopping at the first channel that overflows its bound (`first_unbounded`),
    then with back-pressure; a deadlock raises `sim.bounded.Deadlock`."""
    if record_steps:
        return oracle_run_graph(graph, tensors, hw, keep_streams, record_steps=True)
    if depth is None and hw is not None:
        depth = hw.channel_depth
    options = dict(chunk=chunk, budget=budget, keep_streams=keep_streams, on_events=on_events, depth=depth)
    try:
        return _run(graph, tensors, hw, first_unbounded=first_unbounded and depth is not None, **options)
    except Overflow:
        return _run(graph, tensors, hw, first_unbounded=False, **options)


def _run(graph: SamGraph, tensors: dict, hw: HwConfig | None, **options) -> GraphRun:
    """One engine run; malformed input is reported with the oracle's exact message."""
    engine = Engine(graph, tensors, hw, **options)
    try:
        return engine.run()
    except KernelFailed as failed:
        events = engine.events()
        if events > ORACLE_RERUN_TOKENS:
            r = failed.runner
            raise MisalignedStreams(f"n{r.id} {r.kind}: its input streams do not fit the primitive "
                                    f"(found after {events:,} token events; the oracle engine on a smaller "
                                    "input names the tokens)") from None
        oracle_run_graph(graph, tensors, hw)  # raises the oracle's exact exception
        raise AssertionError(f"fast engine: {failed} found malformed input the oracle accepts "
                             "(a bug in fuseflow.sim.fast)") from None


def _as_arr(value, lat: int = 0) -> Arr:
    """An input stream given as token text/list, (tokens, visible times) or an `Arr`; tiles are
    laid beside their tokens and Val data numbers them, as in the engine's channels."""
    arr = value if isinstance(value, Arr) else \
        from_tokens(value[0], value[1]) if isinstance(value, tuple) else from_tokens(value)
    if arr.tiles is not None:
        vals = np.nonzero(arr.kind == VAL)[0]
        aligned = np.zeros((len(arr),) + arr.tiles.shape[1:])
        aligned[vals] = arr.tiles[arr.data[vals].astype(np.int64)]
        data = arr.data.astype(np.float64)
        data[vals] = vals
        arr = Arr(arr.kind, data, arr.sent, arr.lat, aligned)
    return arr


def apply(kind: str, inputs: dict, params: dict | None = None, *, tensors: dict | None = None,
          arity: int = 0, hw: HwConfig | None = None, chunk=None) -> NodeRun:
    """`oracle.apply` on the fast engine: one primitive on token lists, text or (tokens, visible
    times), or `Arr`s, fed to it `chunk` tokens at a time (default: whole)."""
    hw = hw or HwConfig()
    params = dict(params or {})
    arrs = {port: _as_arr(value) for port, value in inputs.items()}
    sources = {Stream(-1 - q, "out"): arr for q, arr in enumerate(arrs.values())}
    node = Node(0, kind, params, dict(zip(arrs, sources)), arity)
    graph = SamGraph(f"apply {kind}")
    graph.nodes = [node]
    size = chunk if chunk is not None else max([len(a) for a in arrs.values()] + [16])
    engine = Engine(graph, tensors or {}, hw, chunk=size, keep_streams=True, record_consumed=True, sources=sources)
    try:
        engine.run()
    except KernelFailed:
        timed = {port: (to_tokens(a), a.time.tolist()) for port, a in
                 ((p, _as_tokens_arr(v)) for p, v in inputs.items())}
        _run_node(0, kind, params, arity, timed, tensors or {}, hw, {p: p for p in inputs})
        raise AssertionError(f"fast engine: n0 {kind} found malformed input the oracle accepts "
                             "(a bug in fuseflow.sim.fast)") from None
    runner = engine.runners[-1]
    outs = {port: engine.channels[Stream(0, port)] for port in runner.outs}
    left = runner.finish() if kind in ("level_write", "value_write") else {}
    consumed = {port: engine.consumed.get(x, []) for port, x in zip(runner.ins, runner.readers)}
    return NodeRun({p: tokens_of(ch) for p, ch in outs.items()}, {p: times_of(ch) for p, ch in outs.items()},
                   int(runner.S[2]), int(runner.S[0]), runner.counters(), left.get("level"), left.get("vals"),
                   {p: consumed[p] for p in arrs})


def _as_tokens_arr(value) -> Arr:
    return value if isinstance(value, Arr) else \
        from_tokens(value[0], value[1]) if isinstance(value, tuple) else from_tokens(value)
