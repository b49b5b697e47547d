"""A schedule simulated by partitions: every kernel sharded (all windows) or sampled, its inputs
from the reference stored on the positions their producers wrote (`partition.footing`: the whole
run's work), its outputs verified window by window (rows) or summed (partial sums). A sampled
kernel whose outputs a later kernel reads as stored is sampled where their stored positions can be
derived (`partition.structure`, checked on every sampled window), else has every window
simulated; a kernel whose outer loop is a reduction runs as one window when sharded, and in every
mode when another of its ops reads that reduction.

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
from concurrent.futures import Future

import numpy as np

from ..ir.reference import ReferenceRun
from ..memory import Budget, MemoryLimitError
from ..pipeline import KernelResult, SimResult, VerificationError, compare, prepared_request, undefined_error
from ..request import SimRequest
from ..sim.window import Window
from .drain import measured_drain
from .footing import (
    EveryPosition,
    combined_pattern,
    compacted,
    pattern_count,
    patterns_read_as_written,
    stored_as_written,
)
from .partials import PartialSums, partial_sums
from .sampled import KernelSample, SamplePlan, kernel_windows, narrowed, sample_kernel, too_small, window_work
from .sharded import MIN_WINDOW, KernelShards, shard_kernel
from .structure import derived_pattern
from .timing import TaskTime, Timings
from .window_cost import window_estimates
from .windows import KernelSetup, kernel_setup, kernel_tensors, local_budget, row_mask, window_problem

SHARDED_METHOD = (f"up to {{n}} windows per kernel, each at least {MIN_WINDOW} outer coordinates wide; cycles = sum "
                  "of windows - each boundary's overlap (measured on its own margins); max fifo: the largest of any "
                  "window's")
# a sampled kernel whose outer loop is a reduction: its windows checked and its drain measured on
# the kernel's ops over inputs cut along that loop (`partition.partials`, `partition.drain`) ...
UNCUT = "its outer loop is a reduction over inputs that no one cut along it fits (a window's partial sums uncheckable)"
DRAINED = ("kernel {k}'s outer loop is a reduction: its windows' cycles less {rate:.4g} per value written, plus the "
           "{whole} values a whole run writes once (the rate's spread widens the interval)")
# ... and a kernel of too few windows to sample runs whole unless this many times its outputs (dense)
# would not fit: GraphSAGE's unfused t11*W over the MAG twin (2.06 GB of output, 5 windows) run whole
# grew to 20.9 GB before the OS stopped it
WHOLE_OUTPUT_COPIES = 10
# sharded, a kernel whose outer loop is a reduction runs as one window: each window would write the
# whole output again (partial sums), which is other work than the whole run's (spmm_jik at 3 and 8
# shards: tokens +1.5%, cycles +6.8% to +10.3%, before this rule)
REDUCING_WHOLE = "kernel {k} whole: its outer loop is a reduction (windows would each write the whole output again)"


def _whole_reason(setup: KernelSetup, plan: SamplePlan, partials: PartialSums | None, budget: Budget) -> str | None:
    """Why the sampled mode runs this kernel whole, or None to sample it: a kernel of few windows
    is sampled all the same when a whole run's outputs would not fit in `budget`."""
    if setup.reduces and partials is None:
        return UNCUT
    few = too_small(kernel_windows(setup, plan), plan)
    return few if few and WHOLE_OUTPUT_COPIES * _output_bytes(setup) <= budget.allowed() else None


def _output_bytes(setup: KernelSetup) -> float:
    """Bytes of the kernel's outputs, dense."""
    return sum(float(np.prod(meta.shape, dtype=np.float64)) * 8
               for meta in setup.graph.tensors.values() if meta.role == "output")


def _written_only(kernel) -> set[str]:
    """The program's tensors a kernel writes and does not also read."""
    tensors = kernel.graph.tensors
    read = {meta.stores(n) for n, meta in tensors.items() if meta.role != "output"}
    return {meta.stores(n) for n, meta in tensors.items() if meta.role == "output"} - read - \
        ({leaf.tensor for leaf in kernel.region.leaves} if kernel.region is not None else set())


def _part(program, compiled, kernel, values, setup, shards, sample, hw, engine, client, check, budget, work=None,
          derived: bool = False):
    """A kernel's partitioned run, and why it ran whole where the sampled mode could not sample it.
    Sharded on a cluster, its windows are cut to equal `work` (`shard_work`). Sampled, a reducing
    kernel's windows are checked as they run (`partition.partials`, where `check` gives the
    tolerances) and its drain is taken out of their cycles (`partition.drain`). A kernel whose
    outputs a later kernel reads as stored is sampled only where their patterns are `derived`
    (`partition.structure`); else every window is simulated."""
    if setup.unwindowed:
        return shard_kernel(setup, 1, hw, engine, client), f"kernel {kernel.index} whole: {setup.unwindowed}"
    if sample is None:
        if setup.reduces:
            return shard_kernel(setup, 1, hw, engine, client), REDUCING_WHOLE.format(k=kernel.index)
        return shard_kernel(setup, shards, hw, engine, client, work), None
    if setup.patterns and not derived:  # a later kernel reads what it stored, which a sample does not give
        lanes = len(client.scheduler_info()["workers"]) if client is not None and not setup.reduces else 1
        names = ", ".join(sorted(setup.patterns))
        return shard_kernel(setup, max(1, lanes), hw, engine, client), \
            f"kernel {kernel.index} every window simulated: a later kernel reads {names} as it was stored"
    partials = partial_sums(kernel, values, *(check or ())) if setup.reduces else None
    why = _whole_reason(setup, sample, partials, budget)
    if why:
        return shard_kernel(setup, 1, hw, engine, client), f"kernel {kernel.index} whole: {why}"
    windows = kernel_windows(setup, sample)
    windows, x = narrowed(windows, window_estimates(compiled, kernel, program, values, windows, budget), sample)
    if partials is None:
        return sample_kernel(setup, sample, hw, engine, client, x, windows), None
    setup.partials = partials if check else None
    drain = measured_drain(setup, partials, windows[0].width(), hw, engine, client)
    setup.drain_rate = drain.rate
    part = sample_kernel(setup, sample, hw, engine, client, x, windows)
    part.cycles = part.cycles.shifted(drain.rate * drain.whole, drain.slack)
    return part, DRAINED.format(k=kernel.index, rate=drain.rate, whole=drain.whole)


BALANCE_PIECES = 64  # sharded windows are cut by the heuristic's estimate of this many pieces of the outer loop


def shard_work(compiled, kernel, program, values: dict, setup: KernelSetup, budget: Budget | None = None) -> np.ndarray:
    """Each outer coordinate's work, which sharded windows are cut to equal shares of: the
    heuristic's estimate of BALANCE_PIECES pieces of the loop (`window_estimates`), each spread
    evenly over its coordinates; the stored work under each coordinate (`window_work`) where the
    kernel has no fused region to estimate or the estimates are all 0. At the middle cut,
    simulated piece by piece (64-row pieces' CPU seconds): GCN CiteSeer `full` 50.1% of the work
    left of the cut by the estimates, 50.6% by the stored work; GraphSAGE CiteSeer `full` 50.6%
    and 51.6% (its stored work is the same in every row: equal widths)."""
    if kernel.region is None:  # no fused region to estimate
        return window_work(setup)
    pieces = Window.even(setup.extent, min(BALANCE_PIECES, setup.extent))
    x = np.maximum(window_estimates(compiled, kernel, program, values, pieces, budget), 0.0)
    if not x.sum() > 0:
        return window_work(setup)
    widths = np.array([w.width() for w in pieces])
    return np.repeat(x / np.maximum(widths, 1), widths)


def simulate_partitioned(program, schedule="full", inputs: dict | None = None, *, seed: int = 0,
                         density: float = 0.1, hw=None, engine: str = "fast", shards: int | None = None,
                         sample: SamplePlan | None = None, client=None, check: bool = True,
                         rtol: float = 1e-6, atol: float = 1e-9, budget: Budget | None = None,
                         timings: Timings | None = None) -> SimResult:
    """`pipeline.simulate`, with each kernel cut into `shards` windows (all simulated, cycles
    combined) or estimated from a `sample` of windows (cycles with a 95% interval): `run_partitioned`
    of the request `pipeline.prepared_request` makes."""
    start = time.perf_counter()
    clock = timings if timings is not None else Timings()
    with clock.phase("compile"):
        request = prepared_request(program, schedule, inputs, seed=seed, density=density, hw=hw, engine=engine,
                                   check=check, rtol=rtol, atol=atol, budget=budget)
    result = run_partitioned(request, shards=shards, sample=sample, client=client, timings=clock)
    result.wall_seconds = time.perf_counter() - start  # compiling included
    return result


def run_partitioned(request: SimRequest, *, shards: int | None = None, sample: SamplePlan | None = None,
                    client=None, timings: Timings | None = None) -> SimResult:
    """`request` with each kernel cut into `shards` windows or estimated from a `sample` of them;
    windows run as tasks on a dask `client` when one is given (or a `concurrent.futures.Future`
    of one: a cluster still starting, waited for once the first kernel is ready to run). The
    reference is evaluated kernel by kernel, holding only the values this and later kernels read
    or write, each dense result sized against the request's budget first (default: what is
    available). `timings` (`partition.timing.Timings`) receives the driver's phases and every
    window task's time."""
    start = time.perf_counter()
    clock = timings if timings is not None else Timings()
    data, compiled, hw, engine, check = request.data, request.compiled, request.hw, request.engine, request.check
    rtol, atol = request.rtol, request.atol
    program = compiled.program  # canonical: a reduction from a start other than its identity is two ops (`Y_r`, `Y`)
    budget = request.budget or Budget()
    needs = [set() if k.is_reshape else kernel_tensors(k) for k in compiled.kernels]
    written = [set() if k.is_reshape else _written_only(k) for k in compiled.kernels]
    as_written = patterns_read_as_written(compiled.kernels)
    stored_patterns: dict = {}  # intermediate -> (positions its producer stored, the producer's GraphTensor)
    last_need = {name: i for i, names in enumerate(needs) for name in names}
    ref = ReferenceRun(program, data, check=budget.check)
    kernels, parts, notes = [], [], []
    for i, kernel in enumerate(compiled.kernels):
        if kernel.is_reshape:
            kernels.append(KernelResult(kernel.index, f"k{kernel.index}:reshape", kernel.group, kernel.order,
                                        0, 0, 0, 0, 0, 0))
            continue
        with clock.phase(f"kernel {kernel.index}: reference, inputs stored"):
            values = ref.values(needs[i] - written[i])  # its outputs once its inputs' stored copies are gone
            setup = kernel_setup(kernel, values, budget, _as_stored(stored_patterns, needs[i], values, budget),
                                 as_written[i])
        work = None
        if sample is None and client is not None and (shards or 1) > 1:
            with clock.phase(f"kernel {kernel.index}: work estimated for the cut"):
                work = shard_work(compiled, kernel, program, values, setup, budget)
        if check and isinstance(client, Future) and not client.done():
            with clock.phase(f"kernel {kernel.index}: reference outputs, while the cluster starts"):
                values.update(_early_values(ref, written[i], budget))
        client = _ready(client, clock)
        with clock.phase(f"kernel {kernel.index}: windows and margins"), local_budget(budget):
            derived = _derived_patterns(kernel, setup, budget) if sample is not None and setup.patterns else {}
            part, note = _part(program, compiled, kernel, values, setup, shards, sample, hw, engine, client,
                               (rtol, atol) if check else None, budget, work, bool(derived))
        _record_tasks(clock, kernel.index, part)
        notes += [note] if note else []
        stored_patterns.update(_stored_patterns(setup, part, derived, str(compiled.schedule)))
        part.setup = setup.without_inputs()  # what later steps read of it: its graph
        del setup
        if check:
            with clock.phase(f"kernel {kernel.index}: verified"):
                values.update(ref.values(written[i] - set(values)))
                _verify_or_undefined(part, values, rtol, atol, str(compiled.schedule), program, data)
        parts.append(part)
        kernels.append(_kernel_result(kernel, part))
        del values
        ref.keep(name for name, j in last_need.items() if j > i)
        for name in [n for n in stored_patterns if last_need.get(n, -1) <= i]:
            del stored_patterns[name]
    result = SimResult(program.name, str(compiled.schedule), sum(k.cycles for k in kernels),
                       check and all(_verifiable(p) for p in parts), 0.0,
                       *(sum(getattr(k, a) for k in kernels) for a in ("flops", "mem_reads", "mem_writes", "tokens")),
                       max((k.max_occupancy for k in kernels), default=0), 0.0, kernels)
    if sample is None:
        result.mode, result.method = "sharded", "; ".join([SHARDED_METHOD.format(n=shards), *notes])
    else:
        _sampled_totals(result, parts, sample, notes)
    if check and all(isinstance(p, KernelShards) for p in parts):
        with clock.phase("outputs combined"):
            result.outputs = {n: v for p in parts for n, v in p.outputs().items() if n in program.outputs}
    result.wall_seconds = time.perf_counter() - start
    return result


def _derived_patterns(kernel, setup: KernelSetup, budget: Budget) -> dict:
    """The stored positions of every output of `kernel` a later kernel reads as stored, derived
    from its structure (`partition.structure`) within `budget`; {} unless all of them can be."""
    derived = {name: derived_pattern(kernel, setup, name, budget) for name in setup.patterns}
    return derived if all(p is not None for p in derived.values()) else {}


def _stored_patterns(setup: KernelSetup, part, derived: dict, schedule: str) -> dict:
    """{output: (its stored positions, its GraphTensor)} of the outputs later kernels read as
    stored: derived ones (checked on the sampled windows), else those all its windows stored
    (none where the writers stored fewer levels than dimensions: read back decoded, as whole)."""
    if derived and isinstance(part, KernelSample):
        _check_derived(setup, part, derived, schedule)
        return {name: (pattern, setup.graph.tensors[name]) for name, pattern in derived.items()}
    out = {}
    for name in sorted(setup.patterns):
        found = [r.written[name] for r in part.runs]
        if all(f is not None for f in found):
            meta = setup.graph.tensors[name]
            out[name] = (compacted(combined_pattern(found, meta.shape), meta), meta)
    return out


def _check_derived(setup: KernelSetup, part: KernelSample, derived: dict, schedule: str) -> None:
    """Each sampled window stored exactly the derived positions in its rows (a partial sum, a
    subset of them): a derivation that disagrees with the simulator is a bug, not a result."""
    for name, pattern in derived.items():
        dim = setup.dims.get(name)
        for run in part.runs:
            got = run.written.get(name)
            if got is None:
                continue
            got = combined_pattern([got], setup.graph.tensors[name].shape)
            if isinstance(pattern, EveryPosition):  # every position: a window stores all of its rows'
                ok = dim is None or _stores_its_rows(got, run.window, dim, pattern.shape)
            elif dim is None:
                ok = got.shape[1] == 0 or np.isin(_flat(got, setup, name), _flat(pattern, setup, name)).all()
            else:
                inside = row_mask(run.window, setup.graph.tensors[name].shape[dim])
                want = pattern[:, inside[pattern[dim]]]
                ok = want.shape == got.shape and bool((want == got).all())
            if not ok:
                raise VerificationError(f"window {run.window} of kernel {setup.index} stored other positions of "
                                        f"{name} than its structure gives", f"schedule {schedule}",
                                        "please report this with the program and schedule")


def _stores_its_rows(got: np.ndarray, window, dim: int, shape) -> bool:
    """Whether `got` (unique positions) is every position whose coordinate along `dim` lies in
    `window`'s ranges."""
    rest = int(np.prod([s for k, s in enumerate(shape) if k != dim], dtype=np.int64))
    return got.shape[1] == window.width() * rest and bool(row_mask(window, shape[dim])[got[dim]].all())


def _flat(pattern: np.ndarray, setup: KernelSetup, name: str) -> np.ndarray:
    """One int64 key per position of `pattern` (row-major over the tensor's shape)."""
    return np.ravel_multi_index(tuple(pattern), setup.graph.tensors[name].shape) if pattern.shape[1] else \
        np.zeros(0, dtype=np.int64)


# storing an intermediate on its producer's pattern, per position: its coordinates (held), and
# `from_entries`'s sort order, reordered coordinates, keys, levels and values (measured: GCN's
# unfused t13 over the MAG twin, 257 M positions, took the process past 19 GB at 48 assumed) ...
STORED_ENTRY_BYTES = 112
# ... and on every position (`footing.EveryPosition`): the values in level order and the last
# compressed level's coordinates
EVERY_ENTRY_BYTES = 24


def _as_stored(patterns: dict, names: set[str], values: dict, budget: Budget) -> dict:
    """The intermediates among `names` as their producers stored them (`footing.stored_as_written`):
    {name: (StoredTensor, the producer's GraphTensor)}, each sized against `budget` first."""
    out = {}
    for name in sorted(names & set(patterns)):
        pattern, meta = patterns[name]
        per_entry = EVERY_ENTRY_BYTES if isinstance(pattern, EveryPosition) else STORED_ENTRY_BYTES
        budget.check(per_entry * pattern_count(pattern) * max(1, int(np.prod(meta.block or (1,)))),
                     f"{name} stored as its producer wrote it")
        out[name] = (stored_as_written(pattern, meta, values[name]), meta)
    return out


EARLY_HEADROOM = 4  # the reference's outputs computed before the windows only if each result fits 4 times over


def _early_values(ref: ReferenceRun, names: set[str], budget: Budget) -> dict:
    """The reference's `names`, computed now (while the driver waits for its cluster, instead of
    after the windows: GCN CiteSeer full, 0.46 s off a 30 s sharded run) where each dense result
    on the way fits `EARLY_HEADROOM` times over beside the kernel's stored inputs; else nothing
    (they are computed after the windows, once the stored inputs are gone)."""
    def strict(nbytes: float, what: str) -> None:
        budget.check(EARLY_HEADROOM * nbytes, what)

    try:
        return ref.values(names, check=strict)
    except MemoryLimitError:  # raised before the result was made: the reference goes on later
        return {}


def _ready(client, clock: Timings):
    """The dask client, waited for if it is still starting (a `concurrent.futures.Future`)."""
    if isinstance(client, Future):
        with clock.phase("waiting for the cluster to start"):
            return client.result()
    return client


def _record_tasks(clock: Timings, index: int, part) -> None:
    """Every run of a kernel's part, labelled by its role, into `clock`."""
    if isinstance(part, KernelShards):
        roles = [("window", part.runs), ("settling", part.settling),
                 ("boundary", [r for b in part.boundaries for r in (b.left, b.right, b.both)])]
    else:
        roles = [("sample", part.runs)]
    seen = set()
    for role, runs in roles:
        for run in runs:
            if run.time is not None and id(run) not in seen:
                seen.add(id(run))
                t = run.time
                clock.add_task(TaskTime(f"{role} {t.label} (kernel {index})", t.worker, t.start, t.wall, t.cpu))


def _kernel_result(kernel, part: KernelShards | KernelSample) -> KernelResult:
    name = part.setup.graph.name
    if isinstance(part, KernelShards):
        return KernelResult(kernel.index, name, kernel.group, kernel.order, part.cycles, part.counter("flops"),
                            part.counter("mem_reads"), part.counter("mem_writes"), part.tokens, part.max_occupancy,
                            mode="windows" if len(part.runs) > 1 else "whole")
    c = part.cycles
    return KernelResult(kernel.index, name, kernel.group, kernel.order, round(c.total), part.counters["flops"],
                        part.counters["mem_reads"], part.counters["mem_writes"], part.tokens, part.max_occupancy,
                        math.floor(c.low), math.ceil(c.high), "sampled")


def _verifiable(part) -> bool:
    """Whether a kernel's outputs were all compared: a sharded one always, a sampled one when
    its outer loop indexes every output or every sampled window's partial sums were checked."""
    return isinstance(part, KernelShards) or not part.setup.reduces or \
        all(run.partials is not None for run in part.runs)


def _verify_or_undefined(part, values: dict, rtol: float, atol: float, schedule: str, program, data) -> None:
    """`_verify`; a mismatch on data where the program's result is undefined (a NaN the
    reference makes) raises that one-line error instead."""
    try:
        _verify(part, values, rtol, atol, schedule)
    except VerificationError:
        undefined = undefined_error(program, data)
        if undefined is None:
            raise
        raise undefined from None


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


def _sampled_totals(result: SimResult, parts: list, sample: SamplePlan, notes: list[str]) -> None:
    """The sampled run's interval: kernels' half-widths added in quadrature (independent samples);
    kernels run whole add their exact cycles. With no kernel sampled, the run is `sharded`: every
    window simulated (each kernel's own mode says whether in one window or several)."""
    sampled = [p for p in parts if isinstance(p, KernelSample)]
    if not sampled:
        result.mode, result.method = "sharded", "; ".join(["nothing sampled", *notes])
        result.cycles_low = result.cycles_high = result.cycles
        result.sampled_fraction = 1.0
        return
    half = math.sqrt(sum(((p.cycles.high - p.cycles.low) / 2) ** 2 for p in sampled))
    total = sum(p.cycles.total for p in sampled) + sum(p.cycles for p in parts if isinstance(p, KernelShards))
    result.mode, result.method = "sampled", "; ".join([sample.method, *notes])
    result.cycles = round(total)
    result.cycles_low, result.cycles_high = math.floor(total - half), math.ceil(total + half)
    whole = len(parts) - len(sampled)  # a kernel run whole counts as one window, simulated
    result.sampled_fraction = (sum(p.cycles.sampled for p in sampled) + whole) / \
        (sum(p.cycles.population for p in sampled) + whole)
