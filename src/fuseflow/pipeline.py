"""Simulate a program under a schedule and check every output against the numpy reference.

    >>> import fuseflow
    >>> p = fuseflow.from_mlir("tests/mlir/spmv.mlir")
    >>> r = simulate(p, "full", seed=1, density=0.2)
    >>> r.verified, r.cycles > 0, len(r.kernels)
    (True, True, 1)
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .errors import FuseflowError, UserError
from .fusion.compile import Compiled, compile_schedule
from .ir.generate import complete_inputs
from .ir.program import IndexOp, Program, op_output
from .ir.reference import bind_inputs, reference
from .ir.values import densify, entries, is_sparse, shape_of
from .memory import Budget, release_freed
from .report.notebook import result_html
from .request import SimRequest
from .sim.hw import HwConfig


class VerificationError(FuseflowError):
    """A simulated output differs from the reference: a bug in fuseflow, reported with its place
    (the CLI exits with status 3)."""

    exit_status = 3


@dataclass
class KernelResult:
    index: int
    name: str
    group: list[str]
    order: list[str]
    cycles: int
    flops: int
    mem_reads: int
    mem_writes: int
    tokens: int
    max_occupancy: int
    cycles_low: int | None = None  # a sampled kernel's 95% interval
    cycles_high: int | None = None
    mode: str = "whole"  # how it ran: "whole", "windows" (every window of its outer loop), "sampled"


@dataclass(frozen=True)
class Work:
    """The work a kernel did: token events, FLOPs, reads and writes. Two ways of running one
    schedule (whole, sharded, bounded, oracle) must do the same work kernel by kernel, not only
    agree in values (`work_differences`).

        >>> Work.of(KernelResult(0, "k0", ["t2"], ["i"], 10, 4, 6, 2, 30, 1))
        Work(tokens=30, flops=4, mem_reads=6, mem_writes=2)
    """

    tokens: int
    flops: int
    mem_reads: int
    mem_writes: int

    @staticmethod
    def of(kernel) -> "Work":
        """A `KernelResult`'s work, or an `execute.KernelRun`'s (its counters)."""
        if isinstance(kernel, KernelResult):
            return Work(kernel.tokens, kernel.flops, kernel.mem_reads, kernel.mem_writes)
        counts = kernel.counters
        return Work(kernel.tokens, counts.get("flops", 0), counts.get("mem_reads", 0), counts.get("mem_writes", 0))


def work_differences(got: list, want: list) -> list[tuple[int, str, int, int]]:
    """(kernel index, what, got, want) for every count in which the kernels of two runs of one
    schedule (`KernelResult`s or `execute.KernelRun`s, in kernel order) differ; [] when they
    did the same work."""
    out = []
    for g, w in zip(got, want):
        a, b = Work.of(g), Work.of(w)
        out += [(w.index, f, getattr(a, f), getattr(b, f)) for f in Work.__dataclass_fields__
                if getattr(a, f) != getattr(b, f)]
    return out


@dataclass
class SimResult:
    program: str
    schedule: str
    cycles: int
    verified: bool
    max_abs_error: float
    flops: int
    mem_reads: int
    mem_writes: int
    tokens: int
    max_occupancy: int
    wall_seconds: float
    kernels: list[KernelResult] = field(default_factory=list)
    outputs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    mode: str = "whole"  # or "sharded" (partitioned, every window of every kernel simulated), "sampled" (an estimate)
    method: str = ""  # how a sharded or sampled run combined its windows
    cycles_low: int | None = None  # sampled: the 95% interval of `cycles`
    cycles_high: int | None = None
    sampled_fraction: float | None = None  # sampled: the share of windows simulated

    def to_json(self) -> dict:
        data = asdict(self)
        del data["outputs"]
        return data

    def _repr_html_(self) -> str:  # Jupyter shows the totals and a row per kernel (report.notebook)
        return result_html(self)


def _jit_disabled() -> bool:
    """Whether numba's JIT is off (NUMBA_DISABLE_JIT=1): the fast engine's kernels then do not
    compile (they are numba dispatchers); the first time, one line on stderr says so."""
    from numba.core import config  # noqa: PLC0415 - numba is slow to import; only a simulation needs it

    if config.DISABLE_JIT and not _JIT_NOTE_GIVEN:
        _JIT_NOTE_GIVEN.append(True)
        print("fuseflow: note: NUMBA_DISABLE_JIT is set, so the fast engine's kernels cannot be compiled: "
              "simulating with the oracle engine (the same cycles, more slowly)", file=sys.stderr)
    return bool(config.DISABLE_JIT)


_JIT_NOTE_GIVEN: list = []


def engine_function(name: str):
    """The `run_graph` of engine `name` (fast or oracle; the oracle for fast when numba's JIT is
    disabled)."""
    if name == "oracle" or name == "fast" and _jit_disabled():
        from .sim.oracle import run_graph
    elif name == "fast":
        try:
            from .sim.fast import run_graph
        except ImportError:  # pragma: no cover - the fast engine ships with fuseflow
            from .sim.oracle import run_graph
    else:
        raise UserError(f"unknown simulation engine {name!r}", None, "use fast or oracle")
    return run_graph


def _aligned(got, want) -> tuple:
    """(coordinates of the k-th compared entry, got values, want values): every entry when either
    side is dense (flat views, coordinates computed only when asked for), else the entries either
    sparse side stores (the rest are 0 on both)."""
    if not (is_sparse(got) and is_sparse(want)):
        got, want = densify(got, "a simulated output"), densify(want, "a reference output")
        shape = np.shape(want)
        return (lambda k: tuple(int(c) for c in np.unravel_index(k, shape))), got.reshape(-1), want.reshape(-1)
    shape = shape_of(want)
    (gr, gc), gv = entries(got)
    (wr, wc), wv = entries(want)
    keys = np.union1d(gr * shape[1] + gc, wr * shape[1] + wc)
    a, b = np.zeros(keys.shape[0]), np.zeros(keys.shape[0])
    a[np.searchsorted(keys, gr * shape[1] + gc)] = gv
    b[np.searchsorted(keys, wr * shape[1] + wc)] = wv
    return (lambda k: (int(keys[k] // shape[1]), int(keys[k] % shape[1]))), a, b


COMPARE_BLOCK = 1 << 20  # entries compared at a time: the temporaries stay a few MB for any output


def compare(name: str, got, want, rtol: float, atol: float) -> tuple[float, str | None]:
    """(largest absolute difference over finite entries, a message naming the first entry
    that differs beyond the tolerances or None); dense or sparse values alike."""
    if shape_of(got) != shape_of(want):
        return float("inf"), f"simulated {name} has shape {shape_of(got)}, the reference {shape_of(want)}"
    where, a, b = _aligned(got, want)
    error, first = 0.0, None
    for start in range(0, a.shape[0], COMPARE_BLOCK):
        x, y = a[start:start + COMPARE_BLOCK], b[start:start + COMPARE_BLOCK]
        finite = np.isfinite(x) & np.isfinite(y)
        if finite.any():
            error = max(error, float(np.abs(x[finite] - y[finite]).max()))
        bad = ~np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
        if first is None and bad.any():
            first = start + int(np.argmax(bad))
    if first is None:
        return error, None
    return error, f"simulated {name} differs from the reference at {where(first)}: {a[first]:.6g} vs {b[first]:.6g}"


def undefined_result(program: Program, data: dict, name: str, got, want, rtol: float,
                     atol: float) -> UserError | None:
    """The error for data on which the program's result is undefined (`undefined_error`), when
    every entry where simulated output `name` differs from the reference is NaN there and 0
    simulated; else None (a mismatch of any other kind is fuseflow's bug)."""
    where, a, b = _aligned(got, want)
    bad = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    if not bad.any() or not np.all(np.isnan(b[bad]) & (a[bad] == 0)):
        return None
    return undefined_error(program, data, name, where(int(np.argmax(bad))))


def undefined_error(program: Program, data: dict, name: str | None = None,
                    first: tuple | None = None) -> UserError | None:
    """A one-line error when some op makes NaN of values that are not (inf - inf, 0 * inf, 0/0)
    and it reaches an output (`name` at `first`, by default the first output holding NaN), else
    None. The reference follows IEEE arithmetic (and PyTorch) there; the sparse graph takes every
    value to be finite and gives 0 (`ir.background`): e.g. a softmax row whose every entry is
    masked. Evaluated again with every intermediate kept, if that fits in memory."""
    try:
        Budget().check(sum(math.prod(t.shape) for t in program.tensors.values() if None not in t.shape)
                       * 8, "the reference's intermediates")
        values = reference(program, bind_inputs(program, data), keep_intermediates=True)
    except (MemoryError, FuseflowError):
        return None
    made = _first_nan_made(program, values)
    if name is None:
        name = next((n for n in program.outputs if n in values and _nan_at(values[n]) is not None), None)
    if made is None or name is None:
        return None
    gold = densify(values[name], "a reference output")
    first = first or _nan_at(gold)
    if first is None or not np.isnan(gold[first]):
        return None
    op, at, operands = made
    place = f"row {first[0]} of {name}" if gold.ndim >= 2 and np.isnan(gold[first[0]]).all() else \
        f"{name} at {first}"
    source = f" from {operands}" if operands else ""
    return UserError(f"the program's result is undefined in {place} (NaN in the reference, 0 simulated): "
                     f"{op} is NaN at {at}{source} (inf - inf, 0 * inf and 0/0 are undefined)",
                     op.loc or f"program {program.name}",
                     "give inputs for which the program is defined (a masked softmax needs an unmasked "
                     "entry in every row: e.g. a higher --density or another --seed)")


def _nan_at(value) -> tuple | None:
    """The first position of a NaN in `value` (dense or sparse), or None."""
    dense = densify(value, "a reference output")
    nan = np.isnan(dense)
    return tuple(int(c) for c in np.unravel_index(int(np.argmax(nan)), dense.shape)) if nan.any() else None


def _first_nan_made(program: Program, values: dict):
    """(the first op whose result holds NaN where none of the tensors it reads does, its first
    NaN position, the values read there, e.g. "filled = -inf, max = -inf"), or None."""
    def has_nan(name: str) -> bool:
        value = values[name]
        return bool(np.isnan(value.data if is_sparse(value) else np.asarray(value)).any())

    for op in program.ops:
        out = op_output(op)
        if out not in values or not has_nan(out) or any(has_nan(n) for n in op.tensors_read if n in values):
            continue
        at = _nan_at(values[out])
        read = []
        if isinstance(op, IndexOp) and not op.reduce_vars:
            position = dict(zip(op.output.vars, at))
            for access in op.inputs:
                index = tuple(position.get(i) if isinstance(i, str) else i for i in access.indices)
                if None not in index and access.tensor in values:
                    read.append(f"{access.tensor} = {densify(values[access.tensor], 'an operand')[index]:g}")
        return op, at, " and ".join(dict.fromkeys(read))
    return None


def first_mismatch(name: str, got, want, rtol: float, atol: float) -> str | None:
    return compare(name, got, want, rtol, atol)[1]


def prepared(program: Program, schedule, inputs: dict | None, seed: int, density: float,
             shapes: dict | None = None) -> tuple[dict, Compiled]:
    """(every input, given or generated from `seed` at `density`, sized by `shapes` where given,
    else by the inputs given; the compiled schedule): unless `schedule` is already a `Compiled`,
    default orders weigh loops by this data's densities, as studies and sweeps do."""
    given = dict(inputs or {})
    shapes = {n: shape_of(v) for n, v in given.items()} if shapes is None else shapes
    data = {n: v for n, v in complete_inputs(program, given, density, seed, shapes).items() if n in program.inputs}
    if isinstance(schedule, Compiled):
        return data, schedule
    from .ir.stats import stats_for

    return data, compile_schedule(program, schedule, {n: shape_of(v) for n, v in data.items()},
                                  stats=stats_for(program, bind_inputs(program, data)))


def simulate(program: Program, schedule="full", inputs: dict | None = None, *, seed: int = 0,
             density: float = 0.1, hw: HwConfig | None = None, engine: str = "fast", check: bool = True,
             rtol: float = 1e-6, atol: float = 1e-9, on_kernel=None, budget=None,
             on_events=None, on_run=None) -> SimResult:
    """Compile (unless `schedule` is already a `Compiled` of `program`), simulate every kernel,
    and compare the outputs with `fuseflow.reference`: `run_request` of `prepared_request`.
    `on_kernel(done, total)` reports progress after each kernel, `on_events(done)` the token
    events within one, `on_run(graph, graph_run)` each kernel's whole result (per-node
    statistics). A `budget` (`fuseflow.memory.Budget`) bounds the memory every kernel may take
    (MemoryLimitError)."""
    start = time.perf_counter()
    request = prepared_request(program, schedule, inputs, seed=seed, density=density, hw=hw, engine=engine,
                               check=check, rtol=rtol, atol=atol, budget=budget)
    result = run_request(request, on_kernel=on_kernel, on_events=on_events, on_run=on_run)
    result.wall_seconds = time.perf_counter() - start  # compiling included
    return result


def prepared_request(program: Program, schedule="full", inputs: dict | None = None, *, seed: int = 0,
                     density: float = 0.1, hw: HwConfig | None = None, engine: str = "fast", check: bool = True,
                     rtol: float = 1e-6, atol: float = 1e-9, budget=None, partitioning=None) -> SimRequest:
    """The `SimRequest` of a run inside the library (`prepared`: inputs completed, the schedule
    compiled on them), the user-facing checks left to the edge (`checks.sim_request`)."""
    data, compiled = prepared(program, schedule, inputs, seed, density)
    return SimRequest(program, compiled, data, seed, density, hw or HwConfig(), engine, check, rtol, atol,
                      budget, partitioning)


def run_request(request: SimRequest, *, on_kernel=None, on_events=None, on_run=None) -> SimResult:
    """Simulate `request` whole, every kernel, and compare the outputs with the reference
    (`request.check`); progress and per-kernel results as `simulate` reports them."""
    from .execute import execute

    start = time.perf_counter()
    program, compiled, data = request.program, request.compiled, request.data
    run = execute(compiled, data, request.hw, engine_function(request.engine), on_kernel,
                  budget=request.budget or Budget(), on_events=on_events, on_run=on_run, keep_values=False)
    error, verified = 0.0, False
    if request.check:
        if not program.outputs:  # verified means at least one output was compared
            raise UserError("the function returns no tensor, so there is nothing to compare",
                            f"program {program.name}",
                            "return the tensors the function computes, or write them into an argument (outs)")
        gold = reference(program, bind_inputs(program, data))
        for name in program.outputs:
            err, problem = compare(name, run.outputs[name], gold[name], request.rtol, request.atol)
            error = max(error, err)
            if problem:
                raise undefined_result(program, data, name, run.outputs[name], gold[name], request.rtol,
                                       request.atol) or \
                    VerificationError(problem, f"schedule {compiled.schedule}",
                                      "please report this with the program and schedule")
        verified = True
        del gold
        release_freed()
    kernels = []
    for k, kr in zip(compiled.kernels, run.kernels):
        kernels.append(KernelResult(k.index, kr.name, k.group, k.order, kr.cycles, kr.counters.get("flops", 0),
                                    kr.counters.get("mem_reads", 0), kr.counters.get("mem_writes", 0),
                                    kr.tokens, kr.max_occupancy))
    return SimResult(program.name, str(compiled.schedule), run.cycles, verified, error,
                     sum(k.flops for k in kernels), sum(k.mem_reads for k in kernels),
                     sum(k.mem_writes for k in kernels), sum(k.tokens for k in kernels),
                     max((k.max_occupancy for k in kernels), default=0), time.perf_counter() - start,
                     kernels, run.outputs)
