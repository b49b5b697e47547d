"""Run a compiled schedule: each kernel's graph in dependency order, intermediates through memory.

Inputs are dense arrays or (large) scipy sparse matrices; each kernel stores what it reads in
the formats its graph declares (without densifying sparse data), and decodes what its writers
produced: a dense array, or a sparse matrix for a large 2-D tensor written with compressed
levels. A reshape kernel is a view of dense data (0 cycles). The model's cycle count is the sum
of its kernels' cycles.

    >>> import numpy as np, fuseflow
    >>> from fuseflow.fusion.compile import compile_schedule
    >>> p = fuseflow.from_mlir("tests/mlir/spmv.mlir")
    >>> data = fuseflow.random_inputs(p, density=0.3, seed=1)
    >>> run = execute(compile_schedule(p, "full"), data)
    >>> bool(np.allclose(run.outputs["y"], fuseflow.reference(p, data)["y"]))
    True
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from .errors import UserError
from .ir.formats import TensorFormat
from .ir.reference import bind_inputs
from .ir.values import DENSE_LIMIT, check_dense, densify
from .memory import release_freed
from .sam.graph import GraphTensor
from .sim.bounded import Deadlock
from .sim.hw import HwConfig
from .sim.oracle import run_graph
from .sim.storage import StoredTensor, level_entries, storage_bytes


@dataclass
class KernelRun:
    index: int
    name: str
    cycles: int
    counters: dict[str, int]
    tokens: int = 0  # token events: tokens delivered over all streams
    max_occupancy: int = 0  # deepest channel buffering the kernel needed


@dataclass
class ScheduleRun:
    outputs: dict[str, np.ndarray]
    kernels: list[KernelRun] = field(default_factory=list)
    values: dict[str, np.ndarray] = field(default_factory=dict)  # every tensor, dense

    @property
    def cycles(self) -> int:
        return sum(k.cycles for k in self.kernels)

    def total(self, counter: str) -> int:
        return sum(k.counters.get(counter, 0) for k in self.kernels)


def decode(written, meta: GraphTensor):
    """The value of a written tensor: a dense array (of dense tiles when `meta` has a block
    shape; unit dimensions without a level filled in), or a scipy sparse matrix for a large 2-D
    tensor with a compressed level."""
    shape, mode_order, block = meta.shape, meta.mode_order, meta.block
    n = len(written.levels)
    big = int(np.prod(shape, dtype=np.float64)) > DENSE_LIMIT
    if big and len(shape) == 2 and n == 2 and not block and meta.fill == 0.0 and \
            any(written.levels[k].is_compressed for k in range(n)):
        return _decode_sparse(written, tuple(shape), tuple(mode_order))
    check_dense(shape, "a tensor written by a kernel")
    dims = list(mode_order[:n])
    kept = sorted(dims)
    sub = written.to_dense([shape[d] for d in kept], [kept.index(d) for d in dims], meta.fill,
                           [block[d] for d in kept] if block else None)
    return np.reshape(sub, shape)


def _decode_sparse(written, shape, mode_order) -> sp.csr_array:
    """A written 2-D tensor as a CSR matrix, straight from its levels when the inner one is
    compressed (its segments are the index pointers: no coordinate arrays, no sort)."""
    top, inner = written.levels[0], written.levels[1]
    vals = np.asarray(written.vals, dtype=np.float64)
    dims = tuple(shape[m] for m in mode_order)
    if inner.is_compressed:
        if top.is_compressed:  # segments of the stored rows only: spread over all rows
            counts = np.zeros(dims[0], dtype=np.int64)
            counts[top.crd] = np.diff(inner.seg)
            indptr = np.concatenate([[0], np.cumsum(counts)])
        else:
            indptr = inner.seg
        vals, crd = vals[:len(inner.crd)], inner.crd
        keep = vals != 0.0
        if not keep.all():  # explicit zeros a kernel wrote are no entries (new arrays: the written ones stay)
            indptr = np.concatenate([[0], np.cumsum(keep)])[indptr]
            vals, crd = vals[keep], crd[keep]
        major = sp.csr_array((vals, crd, indptr), shape=dims)
        if not major.has_sorted_indices:
            major = major.copy()
            major.sort_indices()
        return major if mode_order == (0, 1) else sp.csr_array(major.T)
    pos, (c0, c1) = level_entries([top, inner])
    vals = vals[pos]
    keep = vals != 0.0
    rows, cols = (c0, c1) if mode_order == (0, 1) else (c1, c0)
    return sp.csr_array((vals[keep], (rows[keep], cols[keep])), shape=shape)


def same_layout(written_meta: GraphTensor, reader_meta: GraphTensor) -> bool:
    """Whether a reader with `reader_meta` takes a tensor written with `written_meta` in the
    layout it was stored in (levels, mode order, shape, tiles, background)."""
    return all(getattr(written_meta, k) == getattr(reader_meta, k)
               for k in ("levels", "mode_order", "shape", "block", "fill"))


def _readable_as_written(entry, meta: GraphTensor) -> bool:
    """Whether a reader with `meta` can read the written `entry` (tensor, its meta) as it is."""
    if entry is None:
        return False
    tensor, wmeta = entry
    return same_layout(wmeta, meta) and len(tensor.levels) == len(meta.shape) and tensor.vals is not None


def _as_written(entry, meta: GraphTensor) -> StoredTensor | None:
    """An intermediate read in the layout its writer stored it in, as stored: explicit zeros a
    kernel wrote (e.g. a sum over an empty fiber) stay, as they would in memory. None when the
    reader needs another layout (then the dense values are encoded again)."""
    if not _readable_as_written(entry, meta):
        return None
    tensor, rank = entry[0], len(meta.shape)
    vals = np.asarray(tensor.vals, dtype=np.float64)
    block = meta.block or ()
    if block:
        vals = vals.reshape((-1,) + block)
    return StoredTensor([tensor.levels[k] for k in range(rank)], vals, meta.shape, TensorFormat.of(meta), meta.fill)


def footprint(graph, chunk=None) -> int:
    """Bytes a kernel needs besides its stored inputs, estimated before it runs: the engine's
    channel buffers, and the written and decoded forms of outputs stored dense (compressed
    outputs grow as they are written, each step checked by the engine)."""
    from .sim.fast.engine import buffer_bytes

    total = buffer_bytes(graph, chunk)
    for meta in graph.tensors.values():
        if meta.role == "output" and all(x == "dense" for x in meta.levels):
            total += 2 * 8 * int(np.prod(meta.shape, dtype=np.float64))
    return total


def stored_inputs(kernel, values: dict, written: dict) -> dict:
    """The kernel's input tensors in the formats its graph reads them in."""
    stored = {}
    for name, meta in kernel.graph.tensors.items():
        if meta.role == "input":
            source = meta.stores(name)
            if source not in values and source not in written:
                raise UserError(f"kernel {kernel.index} reads {source}, which nothing computed")
            stored[name] = (_as_written(written.get(source), meta)
                            or StoredTensor.from_value(_value(source, values, written), TensorFormat.of(meta),
                                                       meta.fill))
    return stored


def storing_bytes(kernel, values: dict, written: dict) -> int:
    """What storing the kernel's inputs will allocate (those read as written take nothing; a
    written one read in another layout is decoded first, at about 40 bytes an entry)."""
    total = 0
    for name, meta in kernel.graph.tensors.items():
        source = meta.stores(name)
        if meta.role != "input" or _readable_as_written(written.get(source), meta):
            continue
        if source in values:
            total += storage_bytes(values[source], TensorFormat.of(meta))
        elif source in written:  # decoded, then stored: as sparse entries when large and 2-D, else dense
            entries = len(written[source][0].vals if written[source][0].vals is not None else ())
            size = int(np.prod(meta.shape, dtype=np.float64))
            total += 136 * entries if size > DENSE_LIMIT and len(meta.shape) == 2 else 8 * size * (len(meta.shape) + 4)
    return total


def _value(name: str, values: dict, written: dict):
    """A tensor's value: given, or decoded (once) from what its kernel wrote."""
    if name not in values:
        values[name] = decode(*written[name])
    return values[name]


def _last_reads(compiled) -> dict[str, int]:
    """The index of the last kernel that reads each tensor."""
    last = {}
    for k, kernel in enumerate(compiled.kernels):
        if kernel.is_reshape:
            last[compiled.program.producer(kernel.group[0]).input] = k
            continue
        for name, meta in kernel.graph.tensors.items():
            if meta.role == "input":
                last[meta.stores(name)] = k
    return last


def _engine_options(budget, on_events) -> dict:
    """The engine options given (both engines take them; a bare `run_graph_fn(graph, tensors,
    hw)` is called without any when none is given)."""
    options = {"budget": budget, "on_events": on_events}
    return {k: v for k, v in options.items() if v is not None}


def execute(compiled, inputs: dict, hw: HwConfig | None = None, run_graph_fn=run_graph,
            on_kernel=None, *, budget=None, on_events=None, on_run=None, keep_values: bool = True) -> ScheduleRun:
    """Run every kernel in order; `on_kernel(done, total)` is called after each one, and
    `on_run(graph, graph_run)` with each kernel's whole result (per-node statistics). With a
    `budget` (`fuseflow.memory.Budget`), a kernel estimated beyond it stops before it runs
    (MemoryLimitError naming it) and the engine checks what it allocates as it runs;
    `on_events(done)` reports token events within a kernel. Without `keep_values`, an
    intermediate is freed after the last kernel that reads it (`values` then holds the
    outputs only)."""
    program = compiled.program
    values = bind_inputs(program, inputs)
    result = ScheduleRun({})
    written: dict = {}  # tensors earlier kernels wrote, as they wrote them (decoded when needed)
    options = _engine_options(budget, on_events)
    last = _last_reads(compiled)
    for k, kernel in enumerate(compiled.kernels):
        if kernel.is_reshape:
            op = program.producer(kernel.group[0])
            source = densify(_value(op.input, values, written), f"input {op.input} of a reshape")
            values[op.output] = np.reshape(source, program.tensors[op.output].shape)
            result.kernels.append(KernelRun(kernel.index, f"k{kernel.index}:reshape", 0, {}))
        else:
            result.kernels.append(_run_kernel(kernel, values, written, hw, run_graph_fn, options, budget, on_run))
        if not keep_values:
            _free(program, k, last, values, written)
        release_freed()
        if on_kernel is not None:
            on_kernel(len(result.kernels), len(compiled.kernels))
    result.outputs = {name: _value(name, values, written) for name in program.outputs}
    result.values = {n: _value(n, values, written) for n in (*values, *written)} if keep_values \
        else dict(result.outputs)
    return result


def _run_kernel(kernel, values, written, hw, run_graph_fn, options, budget, on_run) -> KernelRun:
    """Store the kernel's inputs, run its graph, and keep what it wrote."""
    graph = kernel.graph
    if budget is not None:  # before storing the inputs: storing a large one takes memory too
        needs = footprint(graph) + storing_bytes(kernel, values, written)
        budget.check(needs, f"kernel k{kernel.index} ({graph.name})")
    stored = stored_inputs(kernel, values, written)
    try:
        run = run_graph_fn(graph, stored, hw, **options)
    except Deadlock:  # the engine's bounded run: the report shows the unbounded run's statistics
        if on_run is not None:
            on_run(graph, run_graph_fn(graph, stored, replace(hw, channel_depth=None), **options))
        raise
    if on_run is not None:
        on_run(graph, run)
    if hw is not None and hw.channel_depth is not None:
        from .sim.bounded import bounded_cycles

        run.cycles = bounded_cycles(graph, stored, hw.channel_depth, hw, unbounded=run)
    for name, meta in graph.tensors.items():
        if meta.role == "output":
            values.pop(name, None)
            written[name] = (run.written[name], meta)
    return KernelRun(kernel.index, graph.name, run.cycles, dict(run.counters), sum(run.stream_tokens.values()),
                     max((run.max_occupancy or {}).values(), default=0))


def _free(program, k: int, last: dict, values: dict, written: dict) -> None:
    """Drop the intermediates no kernel after the k-th reads."""
    for name in [n for n in (*values, *written) if n not in program.inputs and n not in program.outputs]:
        if last.get(name, -1) <= k:
            values.pop(name, None)
            written.pop(name, None)
