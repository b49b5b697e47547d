"""Partitioned simulation: windows of a kernel's outer loop, sharded and sampled modes, and the
sampled mode's statistics."""
from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import Future

import numpy as np
import pytest

import fuseflow
from fuseflow.errors import UserError
from fuseflow.execute import execute
from fuseflow.partition import run as partition_run
from fuseflow.partition import sampled
from fuseflow.partition.balance import Spread, equal_work_windows, prefix_work
from fuseflow.partition.run import simulate_partitioned
from fuseflow.partition.sampled import Population, SamplePlan, sample_kernel, settle_on_sample
from fuseflow.partition.sharded import shard_kernel
from fuseflow.partition.stratified import allocate, draw, regression_total, stratify
from fuseflow.partition.timing import Timings
from fuseflow.partition.window_tasks import map_windows
from fuseflow.partition.windows import kernel_setup, reference_values, run_window_of, window_problem
from fuseflow.pipeline import compare, prepared
from fuseflow.sim.fast import run_graph as fast_run
from fuseflow.sim.window import Window, run_window

# kernels whose boundaries the margins measure exactly (cycles of the sharded mode == whole)
EXACT = [("spmv", "full"), ("spmm_ikj", "full"), ("sddmm", "full"), ("sddmm_masked", "full"),
         ("softmax_sparse", "full"), ("softmax_sparse", "unfused"), ("relu", "full"), ("matmul_chain", "unfused"),
         ("batch_matmul", "full"), ("reshape", "unfused"), ("shared_induced", "full")]
# kernels with a gap per boundary (state that crosses outer coordinates), and the largest share of
# the whole run's cycles measured at 3 and 8 shards (seed 2, density 0.3)
GAPPED = [("matmul_chain", "full", 0.03), ("transpose", "full", 0.06), ("spmm_jik", "full", 0.18)]


def _case(name: str, schedule: str, seed: int = 2):
    program = fuseflow.from_mlir(f"tests/mlir/{name}.mlir")
    data, compiled = prepared(program, schedule, None, seed, 0.3)
    return program, data, compiled


@pytest.mark.parametrize("name", ["spmv", "spmm_ikj", "spmm_jik", "sddmm", "softmax_sparse"])
def test_windows_fast_equals_oracle(name):
    """A window (one range, several, none) runs the same tokens, cycles, counters and written
    tensors on both engines."""
    from fuseflow.sim.oracle import run_graph as oracle_run

    program, data, compiled = _case(name, "full")
    kernel = compiled.kernels[0]
    stored = kernel_setup(kernel, reference_values(program, data)).stored
    for window in (Window(((3, 11),)), Window(((0, 2), (5, 9), (20, 31))), Window(())):
        fast, _ = run_window(kernel.graph, stored, window, None, fast_run)
        oracle, _ = run_window(kernel.graph, stored, window, None, oracle_run)
        assert (fast.cycles, fast.stream_tokens, fast.counters) == (oracle.cycles, oracle.stream_tokens,
                                                                    oracle.counters), window
        for tensor, written in fast.written.items():
            assert np.allclose(np.asarray(written.vals, float), np.asarray(oracle.written[tensor].vals, float))


@pytest.mark.parametrize("name,schedule", EXACT)
def test_sharded_equals_whole(name, schedule):
    """The windows' outputs together are the whole output; tokens, counters and cycles add up
    to the whole run's once each boundary's overlap is taken out."""
    program, data, compiled = _case(name, schedule)
    whole = execute(compiled, data, None, fast_run)
    values = reference_values(program, data)
    for kernel, want in zip(compiled.kernels, whole.kernels):
        if kernel.is_reshape:
            continue
        setup = kernel_setup(kernel, values)
        for shards in (3, 8):
            got = shard_kernel(setup, shards, None, "fast", None)
            assert (got.cycles, got.tokens) == (want.cycles, want.tokens), (kernel.index, shards)
            assert {c: got.counter(c) for c in want.counters} == want.counters
            for out, value in got.outputs().items():
                assert compare(out, value, whole.values[out], 1e-9, 1e-12)[1] is None


@pytest.mark.parametrize("name,schedule,gap", GAPPED)
def test_sharded_cycles_within_measured_gap(name, schedule, gap):
    program, data, compiled = _case(name, schedule)
    whole = fuseflow.simulate(program, schedule, seed=2, density=0.3)
    for shards in (3, 8):
        r = simulate_partitioned(program, compiled, data, shards=shards)
        assert r.verified and r.mode == "sharded"
        assert abs(r.cycles - whole.cycles) <= gap * whole.cycles, (shards, r.cycles, whole.cycles)


def test_window_rows_are_checked_against_the_reference():
    program, data, compiled = _case("spmm_ikj", "full")
    values = reference_values(program, data)
    setup = kernel_setup(compiled.kernels[0], values)
    run = run_window_of(setup, Window(((4, 9), (20, 22))), None, "fast")
    assert window_problem(setup, run, values) is None
    y = run.outputs["Y"].toarray()  # a window's 2-D output is kept as its entries (COO)
    assert not y[:4].any() and not y[9:20].any() and y[4:9].any()  # only the window's rows are written
    run.outputs["Y"] = y.copy()
    run.outputs["Y"][21, 0] += 1.0
    assert "differs" in window_problem(setup, run, values)


def test_sparse_window_output_is_checked_on_its_rows_only():
    """A large window output (stored sparse) is compared on the window's rows and must store
    nothing elsewhere, without building the output's whole dense shape."""
    import scipy.sparse as sp

    program, data, compiled = _case("spmm_ikj", "full")
    values = reference_values(program, data)
    setup = kernel_setup(compiled.kernels[0], values)
    run = run_window_of(setup, Window(((4, 9), (20, 22))), None, "fast")
    good = sp.csr_array(run.outputs["Y"])
    for change, expect in (((None, None), None), ((21, 0), "differs"), ((12, 0), "outside the window")):
        y = good.tolil()
        if change[0] is not None:
            y[change] = y[change] + 1.0
        run.outputs["Y"] = sp.csr_array(y)
        problem = window_problem(setup, run, values)
        assert (problem is None) if expect is None else expect in problem, (change, problem)


def test_partitioned_reference_holds_only_what_later_kernels_need(monkeypatch):
    """The partitioned run evaluates the reference kernel by kernel: once a kernel is done, a
    value no later kernel or op needs is dropped (an unfused schedule's intermediates are not
    all held at once), and the results equal the whole run's."""
    from fuseflow.ir.reference import ReferenceRun

    program, data, compiled = _case("matmul_chain", "unfused")
    held, keep = [], ReferenceRun.keep

    def spy(self, names):
        keep(self, names)
        held.append(self.held() - set(program.inputs))

    monkeypatch.setattr(ReferenceRun, "keep", spy)
    r = simulate_partitioned(program, compiled, data, shards=2)
    assert r.verified and r.cycles == fuseflow.simulate(program, compiled, data).cycles
    assert held[-1] == set() and all(len(h) <= 1 for h in held), held


def test_multi_kernel_schedule_reads_intermediates_from_the_reference():
    """Every kernel of an unfused schedule is partitioned on its own; the result equals the whole."""
    program, data, compiled = _case("matmul_chain", "unfused")
    assert len([k for k in compiled.kernels if not k.is_reshape]) == 2
    whole = fuseflow.simulate(program, compiled, data)
    r = simulate_partitioned(program, compiled, data, shards=4)
    assert (r.cycles, r.tokens, r.flops, r.mem_reads, r.mem_writes) == \
        (whole.cycles, whole.tokens, whole.flops, whole.mem_reads, whole.mem_writes)
    assert compare("Z", r.outputs[program.outputs[0]], whole.outputs[program.outputs[0]], 1e-9, 1e-12)[1] is None


def test_sharded_on_a_dask_client():
    """Two workers: windows cut to equal work, every batch of runs spread over both, cycles and
    tokens as the whole run's."""
    distributed = pytest.importorskip("distributed")
    program, data, compiled = _case("spmv", "full")
    whole = fuseflow.simulate(program, compiled, data)
    timings = Timings()
    with distributed.LocalCluster(n_workers=2, processes=False, threads_per_worker=1,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        r = fuseflow.simulate(program, "full", data, shards=4, scheduler=client)
        started = Future()
        started.set_result(client)  # a cluster that was still starting when the run began
        timed = simulate_partitioned(program, compiled, data, shards=2, client=started, timings=timings)
        many = simulate_partitioned(program, compiled, data, shards=6, client=client)  # boundaries beyond the probes
    assert (r.mode, r.cycles, r.tokens, r.verified) == ("sharded", whole.cycles, whole.tokens, True)
    assert (many.cycles, many.tokens, many.flops, many.mem_reads, many.mem_writes, many.verified) == \
        (whole.cycles, whole.tokens, whole.flops, whole.mem_reads, whole.mem_writes, True)
    assert (timed.cycles, timed.tokens, timed.verified) == (whole.cycles, whole.tokens, True)
    phases = [p.name for p in timings.phases]
    assert phases[:2] == ["compile", "kernel 0: reference, inputs stored"]
    assert "waiting for the cluster to start" in phases
    windows = [t for t in timings.tasks if t.label.startswith("window")]
    settling = [t for t in timings.tasks if t.label.startswith("settling")]
    assert len(windows) == 2 and settling and all(t.wall >= 0 for t in timings.tasks)


@pytest.mark.parametrize("extent,count", [(1000, 2), (3327, 4), (10, 3), (5, 5), (3, 8), (700, 3)])
def test_equal_work_windows_cover_the_loop_and_balance_the_work(extent, count):
    rng = np.random.default_rng(extent)
    work = 1 + rng.pareto(1.5, extent)  # heavy-tailed, as a graph's degrees
    windows = equal_work_windows(work, count)
    cuts = [w.ranges[0] for w in windows]
    assert len(windows) == min(count, extent)
    assert cuts[0][0] == 0 and cuts[-1][1] == extent and all(a[1] == b[0] for a, b in zip(cuts, cuts[1:]))
    assert all(hi > lo for lo, hi in cuts)
    before = prefix_work(work)
    share = before[-1] / len(windows)
    if extent >= 100 * count:  # room to balance: each cut within one coordinate's work of its share
        for k, (_, hi) in enumerate(cuts[:-1]):
            assert abs(before[hi] - share * (k + 1)) <= work.max(), (k, hi)


def test_runs_are_dealt_costliest_first_to_the_worker_done_first(monkeypatch):
    """One run per worker at once, the costliest first; each later one to the worker whose run
    just ended; the runs come back in the windows' order, as run one after another."""
    distributed = pytest.importorskip("distributed")
    from fuseflow.partition import window_tasks  # noqa: PLC0415 - only this test

    program, data, compiled = _case("spmv", "full")
    setup = kernel_setup(compiled.kernels[0], reference_values(program, data))
    windows = [Window(((0, 3),)), Window(((3, 20),)), Window(((20, 24),)), Window(((24, setup.extent),))]
    calls, real = [], window_tasks.submit_window

    def recorded(shared, window, hw, engine, client, worker=None):
        calls.append((str(window), worker))
        return real(shared, window, hw, engine, client, worker)

    monkeypatch.setattr(window_tasks, "submit_window", recorded)
    with distributed.LocalCluster(n_workers=2, processes=False, threads_per_worker=1,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        workers = sorted(client.scheduler_info()["workers"])
        runs = map_windows(setup, windows, None, "fast", client, Spread(workers, np.ones(setup.extent)))
    alone = [run_window_of(setup, w, None, "fast") for w in windows]
    assert [(r.window, r.cycles, r.tokens) for r in runs] == [(r.window, r.cycles, r.tokens) for r in alone]
    widths = sorted(windows, key=lambda w: -w.width())
    assert calls[:2] == [(str(widths[0]), workers[0]), (str(widths[1]), workers[1])]
    assert sorted(c[0] for c in calls) == sorted(str(w) for w in windows) and {c[1] for c in calls} <= set(workers)


# -- the estimator ------------------------------------------------------------------------------
def _population(rng, n=2000):
    """Heavy-tailed work x and cycles y = 3x + 40 + noise proportional to sqrt(x)."""
    x = np.floor(rng.pareto(1.3, n) * 20) + 5
    y = 3 * x + 40 + rng.normal(0, 1, n) * 2 * np.sqrt(x)
    return x, y


def test_interval_coverage_on_a_known_population():
    """95% intervals from 5% stratified samples cover the true total in about 95% of 400 draws."""
    x, y = _population(np.random.default_rng(7))
    labels = stratify(x, 8)
    truth = y.sum()
    hits, errors, widths = 0, [], []
    for seed in range(400):
        picked = draw(labels, allocate(x, labels, 100), np.random.default_rng(seed))
        est = regression_total(x, labels, picked, y[picked])
        hits += est.low <= truth <= est.high
        errors.append(abs(est.total - truth) / truth)
        widths.append(est.half_width)
    assert 0.90 <= hits / 400 <= 0.99, hits
    # a normal error's mean is 0.8 of its standard deviation, the half-width about 2 of them
    assert np.mean(errors) < 0.6 * np.mean(widths) < 0.03


def test_strata_and_a_whole_sample():
    x, y = _population(np.random.default_rng(1), 300)
    labels = stratify(x, 8)
    sizes = np.bincount(labels)
    assert 3 <= len(sizes) <= 8 and sizes.min() >= 2  # fewer when a few windows hold a stratum's share each
    heavy = labels[np.argmax(x)]
    assert sizes[heavy] < sizes.max()  # heavy windows sit in a small stratum of their own
    est = regression_total(x, labels, np.arange(300), y)
    assert est.low == est.high == pytest.approx(y.sum())


def test_strata_of_one_draw_follow_a_curve_and_share_their_variance():
    """y bends in x (a window's fixed cost weighs more in light windows), which one slope misses:
    8 strata of one draw each (the variance from neighbours taken together) follow the curve and
    their 95% intervals cover the truth; 4 strata of two draws each (the former design) miss often."""
    x = np.sort(np.random.default_rng(5).uniform(1.6e5, 5.6e5, 61))
    y = 0.93 * x + 4e8 / x

    def trials(strata: int, per: int):
        labels = stratify(x, strata)
        assert len(np.unique(labels)) == strata
        picked = (draw(labels, {h: per for h in range(strata)}, np.random.default_rng(s)) for s in range(400))
        return [regression_total(x, labels, p, y[p]) for p in picked]

    def coverage(estimates) -> float:
        return float(np.mean([e.low <= y.sum() <= e.high for e in estimates]))

    one_each, two_each = trials(8, 1), trials(4, 2)
    assert all(e.low < e.total < e.high for e in one_each)  # each stratum's one draw shares a neighbour's spread
    assert coverage(one_each) >= 0.93 and coverage(two_each) < 0.88
    assert np.mean([abs(e.total - y.sum()) for e in one_each]) < np.mean([abs(e.total - y.sum()) for e in two_each])


def _lagged(margin: int, x: np.ndarray, lag: float) -> np.ndarray:
    """Window values whose margin misses a history of `lag` coordinates: each over-counts by its
    work's share of what falls outside the margin (a heavy window's hidden work, shown again)."""
    return x + 0.05 * x * np.exp(-margin / lag)


def test_the_margin_is_doubled_on_the_sample_until_the_estimate_settles():
    """A bias that a short margin leaves (values too high by what the margin's history misses) is
    followed down by doubling the margin on the sampled windows; the interval, widened by the
    last doubling's move on the side it moved to, covers the truth (the values at an endless margin)."""
    x = np.random.default_rng(3).lognormal(3, 1, 200)
    labels = np.concatenate([[0], stratify(x[1:-1], 4) + 1, [5]])
    pop = Population([Window(((0, 64),))] * 200, x, labels, margin=4, strata=4)
    truth, hits = x.sum(), 0
    for seed in range(20):
        picked = draw(labels, allocate(x, labels, 40), np.random.default_rng(seed))  # windows 0 and 199 included
        asked: list[int] = []
        settled = settle_on_sample(pop, picked, lambda m, p=picked, a=asked: a.append(m) or _lagged(m, x, 24)[p])
        assert asked == sorted(asked) and settled.margin == asked[-1] > 16 and settled.move > 0
        short = pop.widened(regression_total(x, labels, picked, _lagged(4, x, 24)[picked]))
        est = pop.widened(settled.estimate, settled.move)
        assert short.low > truth  # the first margin's interval misses: a bias, not variance
        hits += est.low <= truth <= est.high
        assert est.high - settled.estimate.high == pytest.approx(200)  # a cycle per window on the high side only
    assert hits >= 19
    unbiased = settle_on_sample(pop, np.arange(200), lambda m: x)  # every window: no spread, no move
    assert (unbiased.margin, unbiased.move) == (8, 0.0)


def test_sampled_mode_end_to_end():
    program, data, compiled = _case("sddmm_masked", "full")
    whole = fuseflow.simulate(program, compiled, data)
    small = simulate_partitioned(program, compiled, data, sample=SamplePlan(fraction=0.4, seed=1))
    assert (small.mode, small.cycles, small.cycles_low, small.sampled_fraction) == \
        ("sharded", whole.cycles, whole.cycles, 1.0) and "too few" in small.method  # 1 window: runs whole
    assert small.kernels[0].mode == "whole"
    r = simulate_partitioned(program, compiled, data, sample=SamplePlan(fraction=0.4, seed=1, min_width=4,
                                                                        whole_below=0))
    assert r.mode == "sampled" and r.verified and 0 < r.sampled_fraction <= 1
    assert r.cycles_low <= r.cycles <= r.cycles_high
    assert abs(r.cycles - whole.cycles) <= 0.03 * whole.cycles
    assert r.kernels[0].cycles_low <= r.kernels[0].cycles <= r.kernels[0].cycles_high
    target = simulate_partitioned(program, compiled, data, sample=SamplePlan(error=0.01, seed=1, min_width=4,
                                                                             whole_below=0))
    assert (target.cycles_high - target.cycles_low) / 2 <= 0.01 * target.cycles or target.sampled_fraction == 1


def test_settling_with_a_tolerance_counts_the_doublings_left():
    """An `error` plan's settling assumes each doubling up to the cap moves the estimate as much as
    the last: it stops once that product is within the tolerance, and widens by it."""
    pop = Population([Window(((0, 8),))] * 10, np.ones(10), np.arange(10), margin=2, strata=8)
    assert pop.margins() == [2, 4, 8, 16, 32]
    small = settle_on_sample(pop, np.arange(10), lambda m: np.full(10, 100.0 + 0.5 / m), tolerance=0.01)
    assert (small.margin, small.move) == (4, pytest.approx(4 * 1.25))  # 1.25 moved, 3 doublings left
    large = settle_on_sample(pop, np.arange(10), lambda m: np.full(10, 100.0 + 4 / m), tolerance=0.01)
    assert (large.margin, large.move) == (16, pytest.approx(2 * 2.5))
    assert settle_on_sample(pop, np.arange(10), lambda m: np.full(10, 100.0 + 4 / m)).margin == 32  # no tolerance


def test_error_plan_grows_by_its_spread_at_the_settled_margin(monkeypatch):
    """An `error` plan starts from the least sample, settles the margin on it alone, and simulates
    the windows it adds at that margin only, as many as the spread asks (more than 1.5x at once)."""
    program, data, compiled = _case("sddmm_masked", "full")
    setup = kernel_setup(compiled.kernels[0], reference_values(program, data))
    calls = []
    real = sampled.window_values

    def recorded(setup, pop, indices, hw, engine, client, margin=None):
        calls.append((tuple(indices), pop.margin if margin is None else margin))
        return real(setup, pop, indices, hw, engine, client, margin)

    monkeypatch.setattr(sampled, "window_values", recorded)
    est = sample_kernel(setup, SamplePlan(error=0.01, seed=3, min_width=1, whole_below=0), None, "fast", None)
    first = {i for indices, _ in calls[:1] for i in indices}
    assert len(first) == 8  # windows 0 and last, and the least sample's 6
    settled = calls[-1][1]
    later = [(indices, m) for indices, m in calls if not set(indices) <= first]
    assert later and all(m == settled for _, m in later)  # added windows: the settled margin only
    assert est.cycles.sampled > 1.5 * len(first)
    assert est.cycles.half_width <= 0.01 or est.fraction == 1
    assert est.runs and all(r.outputs for r in est.runs)  # runs at smaller margins dropped theirs, not these


def test_sample_plan_and_api_errors():
    with pytest.raises(UserError):
        SamplePlan()
    with pytest.raises(UserError):
        SamplePlan(fraction=1.5)
    program = fuseflow.from_mlir("tests/mlir/spmv.mlir")
    with pytest.raises(UserError):
        fuseflow.simulate(program, "full", shards=2, sample=0.1)
    with pytest.raises(UserError):
        fuseflow.simulate(program, "full", shards=0)
    assert Window.parse("8:16,0:4,12:20").ranges == ((0, 4), (8, 20))
    with pytest.raises(UserError):
        Window.parse("3-4")


@pytest.mark.slow
def test_cli_sharded_and_sampled_json():
    base = [sys.executable, "-m", "fuseflow", "simulate", "tests/mlir/spmv.mlir", "--schedule", "full",
            "--density", "0.3", "--json"]
    whole = json.loads(subprocess.run(base, capture_output=True, text=True, check=True).stdout)
    sharded = json.loads(subprocess.run(base + ["--shards", "2", "--workers", "2"], capture_output=True, text=True,
                                        check=True).stdout)
    assert sharded["mode"] == "sharded" and sharded["cycles"] == whole["cycles"]
    sampled = json.loads(subprocess.run(base + ["--error", "2%"], capture_output=True, text=True, check=True).stdout)
    assert sampled["mode"] == "sharded" and sampled["cycles"] == whole["cycles"]  # 64 rows: too few to sample
    assert "too few for a sample" in sampled["method"]
    bad = subprocess.run(base + ["--error", "200%"], capture_output=True, text=True)
    assert bad.returncode == 2


def test_a_reducing_outer_loop_is_sampled_drain_taken_out_and_runs_whole_when_sharded():
    """spmm_jik's outer loop is its reduction: each window writes all it touched again. Sampled,
    the drain is taken out of each window and added once (`partition.drain`); sharded, it runs as
    one window (the whole run's work, said so)."""
    program, data, compiled = _case("spmm_jik", "full")
    whole = fuseflow.simulate(program, compiled, data)
    r = simulate_partitioned(program, compiled, data, sample=SamplePlan(fraction=0.25, min_width=1, whole_below=0))
    assert (r.mode, r.verified) == ("sampled", True) and "per value written" in r.method
    assert r.cycles_low <= whole.cycles <= r.cycles_high
    sharded = simulate_partitioned(program, compiled, data, shards=3)
    assert "kernel 0 whole: its outer loop is a reduction" in sharded.method
    assert (sharded.cycles, sharded.tokens, sharded.mem_writes) == (whole.cycles, whole.tokens, whole.mem_writes)


def test_window_runs_are_held_to_the_partitioned_runs_budget(monkeypatch):
    """A partitioned run's windows in this process get the run's budget (a suite task's share),
    not all the memory the machine has left."""
    import fuseflow.partition.windows as windows
    from fuseflow.memory import Budget

    seen, run = [], windows.run_window

    def spy(graph, tensors, window, hw, fn, **options):
        seen.append(options.get("budget"))
        return run(graph, tensors, window, hw, fn, **options)

    monkeypatch.setattr(windows, "run_window", spy)
    program, data, compiled = _case("spmv", "full")
    share = Budget(6 << 30)
    assert simulate_partitioned(program, compiled, data, shards=2, budget=share).verified
    assert seen and all(b is share for b in seen)
    seen.clear()
    run_window_of(kernel_setup(compiled.kernels[0], reference_values(program, data)), Window(((0, 4),)), None, "fast")
    assert seen[0] is not share and seen[0].limit is None  # outside a run: what is available


def test_window_output_over_a_nonzero_background_keeps_only_its_entries():
    """GCN's log-softmax output has background inf: a window keeps the entries it stored (not a
    dense copy of the whole output), is checked on its rows, and the windows combine to the
    whole output."""
    from fuseflow.models.registry import build
    from fuseflow.partition.windows import WindowEntries

    case = build("gcn", "karate")
    data, compiled = prepared(case.program, case.presets["full"], case.inputs, 0, 0.1)
    values = reference_values(case.program, data)
    setup = kernel_setup(compiled.kernels[-1], values)
    name = next(iter(setup.dims))
    run = run_window_of(setup, Window(((3, 9),)), None, "fast")
    got = run.outputs[name]
    assert isinstance(got, WindowEntries) and got.fill != 0 and len(got.vals) == 6 * setup.graph.tensors[name].shape[1]
    assert window_problem(setup, run, values) is None
    got.vals[0] += 1.0
    assert "differs" in window_problem(setup, run, values)
    got.vals[0] -= 1.0
    got.coords[0][0] = 20
    assert "outside the window" in window_problem(setup, run, values)
    whole = fuseflow.simulate(case.program, compiled, data)
    sharded = simulate_partitioned(case.program, compiled, data, shards=3)
    assert sharded.verified and compare(name, sharded.outputs[name], whole.outputs[name], 1e-9, 1e-12)[1] is None


def test_windows_over_their_cycle_budget_are_split_and_still_sampled_right(monkeypatch):
    """A plan with `window_cycles` splits windows estimated above it into pieces of at least
    `NARROWEST` coordinates: the runs are of those pieces and the estimate still holds."""
    program, data, compiled = _case("sddmm_masked", "full")
    whole = fuseflow.simulate(program, compiled, data)
    widths = []
    real = sampled.window_values

    def recorded(setup, pop, indices, hw, engine, client, margin=None):
        widths.extend(pop.windows[i].width() for i in indices)
        return real(setup, pop, indices, hw, engine, client, margin)

    monkeypatch.setattr(sampled, "window_values", recorded)
    plan = SamplePlan(fraction=0.5, seed=1, min_width=32, whole_below=0, window_cycles=1.0)
    r = simulate_partitioned(program, compiled, data, sample=plan)
    assert widths and max(widths) == sampled.NARROWEST  # split from 32 coordinates
    assert r.mode == "sampled" and r.verified and r.cycles_low <= r.cycles <= r.cycles_high
    assert abs(r.cycles - whole.cycles) <= 0.05 * whole.cycles


def test_a_kernel_of_few_windows_is_sampled_when_its_whole_outputs_would_not_fit(monkeypatch):
    """Too few windows to sample runs a kernel whole, unless `WHOLE_OUTPUT_COPIES` times its
    outputs exceed the budget: then its windows run one by one, each checked on its rows."""
    program, data, compiled = _case("sddmm_masked", "full")
    plan = SamplePlan(fraction=0.4, seed=1, min_width=4)
    assert "too few" in simulate_partitioned(program, compiled, data, sample=plan).method
    monkeypatch.setattr(partition_run, "WHOLE_OUTPUT_COPIES", 1e30)
    r = simulate_partitioned(program, compiled, data, sample=plan)
    assert r.mode == "sampled" and r.verified and "too few" not in r.method
    assert r.cycles_low <= r.cycles <= r.cycles_high


def test_early_reference_outputs_only_where_they_fit_with_room_to_spare(monkeypatch):
    """While the cluster starts the driver computes the kernel's reference outputs, unless a
    result on the way would not fit EARLY_HEADROOM times over; then nothing, and the reference
    goes on later as before."""
    from fuseflow.ir.reference import ReferenceRun  # noqa: PLC0415 - only this test
    from fuseflow.memory import Budget  # noqa: PLC0415 - only this test

    program, data, _ = _case("matmul_chain", "full")
    out = program.outputs[0]
    roomy = ReferenceRun(program, data, check=Budget().check)
    assert set(partition_run._early_values(roomy, {out}, Budget())) == {out}
    tight = Budget()
    ref = ReferenceRun(program, data, check=tight.check)
    monkeypatch.setattr(Budget, "allowed", lambda self: 1000)  # far less than 4x any result
    assert partition_run._early_values(ref, {out}, tight) == {}
    assert ref.check == tight.check and ref.done == 0  # nothing made, the budget's own check back
    monkeypatch.undo()
    assert np.allclose(ref.values([out])[out], roomy.values([out])[out])


def test_stored_inputs_and_the_heuristics_masks_ask_the_budget_first(monkeypatch):
    """A partitioned run's kernel inputs, stored for its windows, and the heuristic's masks of
    large inputs are asked of the memory budget before they are made (a clear error, not the OS)."""
    from fuseflow.ir import stats  # noqa: PLC0415 - only this test
    from fuseflow.memory import Budget, MemoryLimitError  # noqa: PLC0415 - only this test
    from fuseflow.partition.window_cost import window_estimates  # noqa: PLC0415 - only this test

    program, data, compiled = _case("spmv", "full")
    kernel, values = compiled.kernels[0], reference_values(program, data)
    with pytest.raises(MemoryLimitError, match="inputs, stored for its windows"):
        kernel_setup(kernel, values, Budget(1))
    assert kernel_setup(kernel, values, Budget()).extent == kernel_setup(kernel, values).extent
    monkeypatch.setattr(stats, "ASKED_FROM", 0)
    with pytest.raises(MemoryLimitError, match="the heuristic's statistics"):
        window_estimates(compiled, kernel, program, values, [Window(((0, 4),))], Budget(1))


def test_the_reference_asks_before_a_sparse_operands_dense_result():
    """An op reading a sparse operand whose result is kept dense asks the budget for it (the
    reference skipped the check whenever an operand was sparse)."""
    import scipy.sparse as sp  # noqa: PLC0415 - only this test

    from fuseflow.ir.reference import ReferenceRun  # noqa: PLC0415 - only this test
    from fuseflow.memory import Budget, MemoryLimitError  # noqa: PLC0415 - only this test

    program = fuseflow.from_mlir("tests/mlir/spmv.mlir")
    data = {"A": sp.random_array((64, 48), density=0.2, format="csr", rng=1), "x": np.ones(48)}
    asked = []
    run = ReferenceRun(program, data, dense_limit=1, check=lambda nbytes, what: asked.append((nbytes, what)))
    y = run.values(program.outputs)[program.outputs[0]]
    assert np.allclose(y, data["A"] @ data["x"])
    assert any(nbytes >= 64 * 8 and "(64,)" in what for nbytes, what in asked)
    with pytest.raises(MemoryLimitError):
        ReferenceRun(program, data, dense_limit=1, check=Budget(1).check).values(program.outputs)


def test_sharded_windows_are_cut_by_the_heuristics_pieces():
    """One work value per outer coordinate, constant within each of the heuristic's pieces and
    summing to the pieces' estimates."""
    from fuseflow.partition.window_cost import window_estimates  # noqa: PLC0415 - only this test

    program, data, compiled = _case("spmm_ikj", "full")
    kernel, values = compiled.kernels[0], reference_values(program, data)
    setup = kernel_setup(kernel, values)
    work = partition_run.shard_work(compiled, kernel, program, values, setup)
    pieces = Window.even(setup.extent, min(partition_run.BALANCE_PIECES, setup.extent))
    x = window_estimates(compiled, kernel, program, values, pieces)
    assert work.shape == (setup.extent,) and (work >= 0).all()
    assert np.isclose(work.sum(), x.sum())
    for w, xi in zip(pieces, x):
        lo, hi = w.ranges[0]
        assert np.allclose(work[lo:hi], xi / (hi - lo))
