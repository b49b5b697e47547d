"""Bounded channels settled from the fast engine's unbounded run (`sim.bounded.fits_unbounded`)
against the oracle's replay (`sim.bounded.bounded_cycles` without a run): the same cycles on every
kernel of every test program, default schedule and others, that the shortcut settles at depths 1,
2, 4 and 1024 (the others are replayed on the oracle either way); deadlock reports; and
`simulate(..., hw=HwConfig(channel_depth=N))` keeps its outputs."""
from __future__ import annotations

import os
import sys

import pytest

import fuseflow
from fuseflow.errors import UserError
from fuseflow.execute import execute
from fuseflow.fusion.compile import compile_schedule
from fuseflow.sim.bounded import Deadlock, bounded_cycles, fits_unbounded
from fuseflow.sim.fast import run_graph as fast_run_graph
from fuseflow.sim.hw import HwConfig

sys.path.insert(0, os.path.dirname(__file__))
from lowering_cases import MLIR_FILES, schedules, with_gold  # noqa: E402

DEPTHS = (1, 2, 4, 1024)


def kernel_runs(program, schedule, data, shapes):
    """(graph, stored tensors, fast unbounded run) of every kernel, as `execute` runs them."""
    runs = []

    def recording(graph, stored, hw=None, **options):
        run = fast_run_graph(graph, stored, hw)
        runs.append((graph, stored, run))
        return run

    execute(compile_schedule(program, schedule, shapes), data, HwConfig(), recording)
    return runs


def verdict(graph, stored, depth, unbounded=None):
    """The cycles, or the deadlock report's content (time, blocked nodes, full and empty channels)."""
    try:
        return bounded_cycles(graph, stored, depth, HwConfig(), unbounded=unbounded)
    except Deadlock as err:
        return ("deadlock", err.time, tuple(err.blocked), tuple(err.full), tuple(err.empty))


@pytest.mark.slow
@pytest.mark.parametrize("path", MLIR_FILES, ids=os.path.basename)
def test_same_cycles_and_deadlocks_as_the_oracle_replay(path):
    program, shapes, data, _ = with_gold(path, seed=3)
    settled = 0
    for schedule in [None, *schedules(program, shapes)[:3]]:
        try:
            runs = kernel_runs(program, schedule, data, shapes)
        except UserError:  # a schedule without a valid order on this program
            continue
        for graph, stored, run in runs:
            for depth in DEPTHS:
                if fits_unbounded(run, depth, HwConfig()):  # else both sides are the same oracle replay
                    settled += 1
                    assert verdict(graph, stored, depth, run) == verdict(graph, stored, depth), (schedule, depth)
    assert settled > 0  # at least the deep channels are settled without the replay


def test_deep_channels_need_no_replay(monkeypatch):
    """At depth 1024 softmax's kernel fits: its cycles come from the fast run, and the oracle
    is never called (replaced here by one that fails)."""
    path = next(p for p in MLIR_FILES if p.endswith("softmax_sparse.mlir"))
    program, shapes, data, gold = with_gold(path, seed=1)
    plain = fuseflow.simulate(program, "full", data)
    monkeypatch.setattr("fuseflow.sim.bounded.run_graph", lambda *a, **k: pytest.fail("replayed"))
    deep = fuseflow.simulate(program, "full", data, hw=HwConfig(channel_depth=1024))
    assert deep.verified and deep.cycles == plain.cycles


def test_shallow_channels_still_deadlock_with_the_report():
    path = next(p for p in MLIR_FILES if p.endswith("softmax_sparse.mlir"))
    program, shapes, data, _ = with_gold(path, seed=1)
    graph, stored, run = kernel_runs(program, "full", data, shapes)[0]
    assert not fits_unbounded(run, 2, HwConfig())
    report = verdict(graph, stored, 2, run)
    assert report[0] == "deadlock" and report[2] and report[3]  # blocked nodes, full channels


def test_the_memory_model_always_replays():
    path = next(p for p in MLIR_FILES if p.endswith("spmv.mlir"))
    program, shapes, data, _ = with_gold(path, seed=1)
    hw = HwConfig(hbm=True)
    graph, stored, run = kernel_runs(program, "full", data, shapes)[0]
    assert not fits_unbounded(run, 1 << 30, hw)
