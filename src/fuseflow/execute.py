"""Run a compiled schedule: each kernel's graph in dependency order, intermediates through memory.

Inputs are dense arrays; each kernel stores what it reads in the formats its graph declares,
and decodes what its writers produced. A reshape kernel is a view of dense data (0 cycles).
The model's cycle count is the sum of its kernels' cycles.

    >>> import numpy as np, fuseflow
    >>> from fuseflow.fusion.compile import compile_schedule
    >>> p = fuseflow.from_mlir("tests/mlir/spmv.mlir")
    >>> data = fuseflow.random_inputs(p, density=0.3, seed=1)
    >>> run = execute(compile_schedule(p, "full"), data)
    >>> bool(np.allclose(run.outputs["y"], fuseflow.reference(p, data)["y"]))
    True
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import UserError
from .ir.formats import LEVEL_FORMATS, TensorFormat
from .ir.reference import bind_inputs
from .sim.hw import HwConfig
from .sim.oracle import run_graph
from .sim.storage import StoredTensor


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


def _format(meta: dict) -> TensorFormat:
    block = tuple(meta["block"]) if meta.get("block") else None
    return TensorFormat(tuple(LEVEL_FORMATS[x] for x in meta["levels"]), tuple(meta["mode_order"]), block)


def decode(written, meta: dict) -> np.ndarray:
    """Dense array of a written tensor (of dense tiles when `meta` has a block shape); unit
    dimensions without a level are filled in."""
    shape, mode_order, block = meta["shape"], meta["mode_order"], meta.get("block")
    n = len(written.levels)
    dims = list(mode_order[:n])
    kept = sorted(dims)
    sub = written.to_dense([shape[d] for d in kept], [kept.index(d) for d in dims], meta.get("fill", 0.0),
                           [block[d] for d in kept] if block else None)
    return np.reshape(sub, shape)


def _as_written(entry, meta: dict) -> StoredTensor | None:
    """An intermediate read in the layout its writer stored it in, as stored: explicit zeros a
    kernel wrote (e.g. a sum over an empty fiber) stay, as they would in memory. None when the
    reader needs another layout (then the dense values are encoded again)."""
    if entry is None:
        return None
    tensor, wmeta = entry
    same = all(wmeta.get(k) == meta.get(k) for k in ("levels", "mode_order", "shape", "block", "fill"))
    rank = len(meta["shape"])
    if not same or len(tensor.levels) != rank or tensor.vals is None:
        return None
    vals = np.asarray(tensor.vals, dtype=np.float64)
    block = tuple(meta["block"]) if meta.get("block") else ()
    if block:
        vals = vals.reshape((-1,) + block)
    return StoredTensor([tensor.levels[k] for k in range(rank)], vals, tuple(meta["shape"]), _format(meta),
                        meta.get("fill", 0.0))


def execute(compiled, inputs: dict, hw: HwConfig | None = None, run_graph_fn=run_graph,
            on_kernel=None) -> ScheduleRun:
    """Run every kernel in order; `on_kernel(done, total)` is called after each one."""
    program = compiled.program
    values = bind_inputs(program, inputs)
    result = ScheduleRun({})
    written: dict = {}  # tensors earlier kernels wrote, as they wrote them
    for kernel in compiled.kernels:
        if kernel.is_reshape:
            op = program.producer(kernel.group[0])
            values[op.output] = np.reshape(values[op.input], program.tensors[op.output].shape)
            result.kernels.append(KernelRun(kernel.index, f"k{kernel.index}:reshape", 0, {}))
            if on_kernel is not None:
                on_kernel(len(result.kernels), len(compiled.kernels))
            continue
        graph = kernel.graph
        stored = {}
        for name, meta in graph.tensors.items():
            if meta["role"] == "input":
                source = meta.get("source", name)
                if source not in values:
                    raise UserError(f"kernel {kernel.index} reads {source}, which nothing computed")
                stored[name] = (_as_written(written.get(source), meta)
                                or StoredTensor.from_dense(values[source], _format(meta), meta.get("fill", 0.0)))
        run = run_graph_fn(graph, stored, hw)
        if hw is not None and hw.channel_depth is not None:
            from .sim.bounded import bounded_cycles

            run.cycles = bounded_cycles(graph, stored, hw.channel_depth, hw)
        for name, meta in graph.tensors.items():
            if meta["role"] == "output":
                values[name] = decode(run.written[name], meta)
                written[name] = (run.written[name], meta)
        result.kernels.append(KernelRun(kernel.index, graph.name, run.cycles, dict(run.counters),
                                        sum(run.stream_tokens.values()),
                                        max((run.max_occupancy or {}).values(), default=0)))
        if on_kernel is not None:
            on_kernel(len(result.kernels), len(compiled.kernels))
    result.outputs = {name: values[name] for name in program.outputs}
    result.values = values
    return result
