"""A schedule simulated by partitions: every kernel sharded (all windows) or sampled, its inputs
from the reference, its outputs verified window by window (rows) or summed (partial sums).

    >>> import fuseflow
    >>> p = fuseflow.from_mlir("tests/mlir/spmm_ikj.mlir")
    >>> r = simulate_partitioned(p, "full", seed=1, density=0.3, shards=4)
    >>> whole = fuseflow.simulate(p, "full", seed=1, density=0.3)
    >>> r.mode, r.verified, r.cycles == whole.cycles, r.tokens == whole.tokens
    ('sharded', True, True, True)
"""
from __future__ import annotations

import math
import time

from ..pipeline import KernelResult, SimResult, VerificationError, compare, prepared
from .sampled import KernelSample, SamplePlan, sample_kernel
from .sharded import KernelShards, shard_kernel
from .windows import kernel_setup, reference_values, window_problem

SHARDED_METHOD = ("{n} windows per kernel; cycles = sum of windows - each boundary's overlap (measured on its own "
                  "margins); max fifo: the largest of any window's")


def simulate_partitioned(program, schedule="full", inputs: dict | None = None, *, seed: int = 0,
                         density: float = 0.1, hw=None, engine: str = "fast", shards: int | None = None,
                         sample: SamplePlan | None = None, client=None, check: bool = True,
                         rtol: float = 1e-6, atol: float = 1e-9) -> SimResult:
    """`pipeline.simulate`, with each kernel cut into `shards` windows (all simulated, cycles
    combined) or estimated from a `sample` of windows (cycles with a 95% interval); windows run
    as tasks on a dask `client` when one is given."""
    start = time.perf_counter()
    data, compiled = prepared(program, schedule, inputs, seed, density)
    values = reference_values(program, data)
    kernels, parts = [], []
    for kernel in compiled.kernels:
        if kernel.is_reshape:
            kernels.append(KernelResult(kernel.index, f"k{kernel.index}:reshape", kernel.group, kernel.order,
                                        0, 0, 0, 0, 0, 0))
            continue
        setup = kernel_setup(kernel, values)
        part = shard_kernel(setup, shards, hw, engine, client) if sample is None else \
            sample_kernel(setup, sample, hw, engine, client)
        if check:
            _verify(part, values, rtol, atol, str(compiled.schedule))
        parts.append(part)
        kernels.append(_kernel_result(kernel, part))
    result = SimResult(program.name, str(compiled.schedule), sum(k.cycles for k in kernels),
                       check and all(_verifiable(p) for p in parts), 0.0,
                       *(sum(getattr(k, a) for k in kernels) for a in ("flops", "mem_reads", "mem_writes", "tokens")),
                       max((k.max_occupancy for k in kernels), default=0), 0.0, kernels)
    if sample is None:
        result.mode, result.method = "sharded", SHARDED_METHOD.format(n=shards)
        if check:
            result.outputs = {n: v for p in parts for n, v in p.outputs().items() if n in program.outputs}
    else:
        _sampled_totals(result, parts, sample)
    result.wall_seconds = time.perf_counter() - start
    return result


def _kernel_result(kernel, part: KernelShards | KernelSample) -> KernelResult:
    name = part.setup.graph.name
    if isinstance(part, KernelShards):
        return KernelResult(kernel.index, name, kernel.group, kernel.order, part.cycles, part.counter("flops"),
                            part.counter("mem_reads"), part.counter("mem_writes"), part.tokens, part.max_occupancy)
    c = part.cycles
    return KernelResult(kernel.index, name, kernel.group, kernel.order, round(c.total), part.counters["flops"],
                        part.counters["mem_reads"], part.counters["mem_writes"], part.tokens, part.max_occupancy,
                        math.floor(c.low), math.ceil(c.high))


def _verifiable(part) -> bool:
    """Whether a kernel's outputs were all compared: a sharded one always, a sampled one when
    its outer loop indexes every output (partial sums are checked only summed)."""
    return isinstance(part, KernelShards) or not part.setup.reduces


def _verify(part, values: dict, rtol: float, atol: float, schedule: str) -> None:
    """Every window's rows against the reference; a sharded kernel's combined outputs too."""
    for run in part.runs:
        problem = window_problem(part.setup, run, values, rtol, atol)
        if problem:
            raise VerificationError(problem, f"schedule {schedule}", "please report this with the program and schedule")
    if isinstance(part, KernelShards):
        for name, got in part.outputs().items():
            meta = part.setup.graph.tensors[name]
            problem = compare(name, got, values[meta.stores(name)], rtol, atol)[1]
            if problem:
                raise VerificationError(f"kernel {part.setup.index} combined from windows: {problem}",
                                        f"schedule {schedule}", "please report this with the program and schedule")


def _sampled_totals(result: SimResult, parts: list[KernelSample], sample: SamplePlan) -> None:
    """The sampled run's interval: kernels' half-widths added in quadrature (independent samples)."""
    half = math.sqrt(sum(((p.cycles.high - p.cycles.low) / 2) ** 2 for p in parts))
    total = sum(p.cycles.total for p in parts)
    result.mode, result.method = "sampled", sample.method
    result.cycles = round(total)
    result.cycles_low, result.cycles_high = math.floor(total - half), math.ceil(total + half)
    windows = sum(p.cycles.population for p in parts)
    result.sampled_fraction = sum(p.cycles.sampled for p in parts) / windows if windows else 1.0
