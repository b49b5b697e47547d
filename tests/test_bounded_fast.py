"""Bounded channels in the fast engine (back-pressure, `HwConfig.channel_depth`) against the
oracle's replay (`sim.bounded.replay` of the oracle's step log): the same cycles, or the same
deadlock report (time, blocked nodes, full and empty channels), on every kernel of every test
program at depths 1, 2, 4 and 1024 under its default schedule, and at depths 4 and 1024 under
three others (depths 1 and 2 cost a Python round per token in both engines: the whole matrix,
about 100 kernels by four depths, runs with FUSEFLOW_BOUNDED_ALL=1). Each kernel's step log is
recorded once and replayed per depth; the engine reports deadlocks itself; and
`simulate(..., hw=HwConfig(channel_depth=N))` keeps its outputs."""
from __future__ import annotations

import os
import sys

import pytest

import fuseflow
from fuseflow.errors import UserError
from fuseflow.execute import execute
from fuseflow.fusion.compile import compile_schedule
from fuseflow.sim.bounded import Deadlock, bounded_cycles, fits_unbounded, replay
from fuseflow.sim.fast import run_graph as fast_run_graph
from fuseflow.sim.hw import HwConfig
from fuseflow.sim.oracle import run_graph as oracle_run_graph

sys.path.insert(0, os.path.dirname(__file__))
from lowering_cases import MLIR_FILES, schedules, with_gold  # noqa: E402

DEPTHS = (1, 2, 4, 1024)
OTHER_DEPTHS = DEPTHS if os.environ.get("FUSEFLOW_BOUNDED_ALL") else (4, 1024)  # other schedules'


def kernel_runs(program, schedule, data, shapes):
    """(graph, stored tensors, fast unbounded run) of every kernel, as `execute` runs them."""
    runs = []

    def recording(graph, stored, hw=None, **options):
        run = fast_run_graph(graph, stored, hw)
        runs.append((graph, stored, run))
        return run

    execute(compile_schedule(program, schedule, shapes), data, HwConfig(), recording)
    return runs


def verdict(cycles):
    """The cycles `cycles()` returns, or its deadlock report's content."""
    try:
        return cycles()
    except Deadlock as err:
        return ("deadlock", err.time, tuple(err.blocked), tuple(err.full), tuple(err.empty))


def engine_verdict(graph, stored, depth, first_unbounded=False):
    """The fast engine's bounded run (with back-pressure from the start unless `first_unbounded`):
    its cycles or its deadlock report (it must bound every channel)."""
    def cycles():
        run = fast_run_graph(graph, stored, HwConfig(channel_depth=depth), first_unbounded=first_unbounded)
        assert run.channel_depth == depth, "the engine fell back to an unbounded run"
        return run.cycles
    return verdict(cycles)


def compare(graph, stored, depths=DEPTHS) -> int:
    """Engine against replay at every depth; returns how many depths deadlocked."""
    log = oracle_run_graph(graph, stored, HwConfig(), record_steps=True)
    deadlocks = 0
    for depth in depths:
        expected = verdict(lambda d=depth: replay(graph, log, d))
        assert engine_verdict(graph, stored, depth) == expected, (graph.name, depth)
        assert engine_verdict(graph, stored, depth, first_unbounded=True) == expected, (graph.name, depth)
        deadlocks += isinstance(expected, tuple)
    return deadlocks


@pytest.mark.slow
@pytest.mark.parametrize("path", MLIR_FILES, ids=os.path.basename)
def test_same_cycles_and_deadlocks_as_the_oracle_replay(path):
    program, shapes, data, _ = with_gold(path, seed=3)
    kernels = 0
    for schedule in [None, *schedules(program, shapes)[:3]]:
        try:
            runs = kernel_runs(program, schedule, data, shapes)
        except UserError:  # a schedule without a valid order on this program
            continue
        for graph, stored, _ in runs:
            compare(graph, stored, DEPTHS if schedule is None else OTHER_DEPTHS)
            kernels += 1
    assert kernels > 0


def test_softmax_kernel_runs_and_deadlocks_as_the_replay():
    """The quick suite's share: sparse softmax fully fused (a deadlock at small depths, cycles at
    1024) and SpMV (cycles at every depth)."""
    deadlocks = 0
    for name in ("softmax_sparse.mlir", "spmv.mlir"):
        path = next(p for p in MLIR_FILES if p.endswith(name))
        program, shapes, data, _ = with_gold(path, seed=1)
        for graph, stored, _ in kernel_runs(program, "full", data, shapes):
            deadlocks += compare(graph, stored)
    assert deadlocks > 0


def test_deep_channels_need_no_replay(monkeypatch):
    """At depth 1024 softmax's kernel runs bounded in the engine: the oracle is never called
    (replaced here by one that fails), and the outputs verify."""
    path = next(p for p in MLIR_FILES if p.endswith("softmax_sparse.mlir"))
    program, shapes, data, gold = with_gold(path, seed=1)
    plain = fuseflow.simulate(program, "full", data)
    monkeypatch.setattr("fuseflow.sim.bounded.run_graph", lambda *a, **k: pytest.fail("replayed"))
    deep = fuseflow.simulate(program, "full", data, hw=HwConfig(channel_depth=1024))
    assert deep.verified and deep.cycles == plain.cycles


def test_the_engine_reports_deadlocks_itself(monkeypatch):
    """Shallow channels deadlock softmax's kernel: the engine names the blocked nodes, the full
    and the empty channels without the oracle (replaced here by one that fails)."""
    path = next(p for p in MLIR_FILES if p.endswith("softmax_sparse.mlir"))
    program, shapes, data, _ = with_gold(path, seed=1)
    graph, stored, run = kernel_runs(program, "full", data, shapes)[0]
    assert not fits_unbounded(run, 2, HwConfig())
    monkeypatch.setattr("fuseflow.sim.bounded.run_graph", lambda *a, **k: pytest.fail("replayed"))
    report = engine_verdict(graph, stored, 2)
    assert report[0] == "deadlock" and report[2] and report[3]  # blocked nodes, full channels


def test_the_shortcut_settles_an_unbounded_run_that_fits():
    """A run the engine could not bound (here: unbounded, as with the memory model) is settled from
    its occupancy where it fits, like the replay."""
    path = next(p for p in MLIR_FILES if p.endswith("spmv.mlir"))
    program, shapes, data, _ = with_gold(path, seed=1)
    graph, stored, run = kernel_runs(program, "full", data, shapes)[0]
    assert run.channel_depth is None and fits_unbounded(run, 1024, HwConfig())
    assert bounded_cycles(graph, stored, 1024, HwConfig(), unbounded=run) == bounded_cycles(graph, stored, 1024)


def test_the_memory_model_always_replays():
    path = next(p for p in MLIR_FILES if p.endswith("spmv.mlir"))
    program, shapes, data, _ = with_gold(path, seed=1)
    hw = HwConfig(hbm=True)
    graph, stored, run = kernel_runs(program, "full", data, shapes)[0]
    assert not fits_unbounded(run, 1 << 30, hw)
    assert fast_run_graph(graph, stored, HwConfig(hbm=True, channel_depth=4)).channel_depth is None


def long_graph():
    """A 7 x 9000 dense scan written out: streams long enough to compact the buffers several times
    while consume times are merged into the occupancy count in batches."""
    from fuseflow.sam.graph import SamGraph
    g = SamGraph("long")
    r = g.add("root")
    rows = g.add("scan", {"tensor": "", "level": 0, "format": "dense", "dim": 7}, ref=r.out("ref"))
    cols = g.add("scan", {"tensor": "", "level": 1, "format": "dense", "dim": 9000}, ref=rows.out("ref"))
    g.add("level_write", {"tensor": "o", "level": 0, "format": "dense", "dim": 7}, crd=rows.out("crd"))
    g.add("level_write", {"tensor": "o", "level": 1, "format": "dense", "dim": 9000}, crd=cols.out("crd"))
    return g


def test_occupancy_of_a_long_bounded_run_is_exact():
    """A bounded run that never fills its FIFOs has the unbounded run's times, hence its
    occupancy, over a long stream (`long_graph`)."""
    g = long_graph()
    plain = fast_run_graph(g, {}, HwConfig())
    most = max(plain.max_occupancy.values())
    bounded = fast_run_graph(g, {}, HwConfig(channel_depth=most), first_unbounded=False)
    assert bounded.channel_depth == most and bounded.cycles == plain.cycles
    assert bounded.max_occupancy == plain.max_occupancy


def test_lean_visits_count_as_the_full_ones(monkeypatch):
    """A lean visit (no positions noted; bounded consumes merged from the last merge's cursor) gives
    the run a visit noting positions gives: cycles, occupancy, tokens and steps, on SpMV's and
    softmax's kernels and a long stream (merged a quarter buffer at a time) at depths 4 and 1024
    (softmax deadlocks at 4: the same report)."""
    from fuseflow.sim.fast.engine import Engine
    taken = []
    lean = Engine._lean

    def counted(self, r):
        taken.append(lean(self, r))
        return taken[-1]

    def outcome(graph, stored, depth):
        try:
            run = fast_run_graph(graph, stored, HwConfig(channel_depth=depth), first_unbounded=False)
        except Deadlock as err:
            return ("deadlock", err.time, tuple(err.blocked), tuple(err.full), tuple(err.empty))
        return run.cycles, run.max_occupancy, run.stream_tokens, run.node_steps

    kernels = [(long_graph(), {})]
    for name in ("spmv.mlir", "softmax_sparse.mlir"):
        path = next(p for p in MLIR_FILES if p.endswith(name))
        program, shapes, data, _ = with_gold(path, seed=1)
        kernels += [(graph, stored) for graph, stored, _ in kernel_runs(program, "full", data, shapes)]
    for graph, stored in kernels:
        for depth in (4, 1024):
            monkeypatch.setattr(Engine, "_lean", counted)
            fast = outcome(graph, stored, depth)
            monkeypatch.setattr(Engine, "_lean", lambda self, r: False)
            assert outcome(graph, stored, depth) == fast, (graph.name, depth)
    assert any(taken)
