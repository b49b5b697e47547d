"""`fuseflow tune` and `fuseflow.tune`: the answer is a verified schedule no slower than any preset
that `fuseflow simulate` reproduces to the cycle; bad input is one line; a killed tune resumes
from its log without simulating again what it finished."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import error_of

import fuseflow
from fuseflow.cli import main
from fuseflow.tuner.context import SimRow, TuneContext
from fuseflow.tuner.costs import Calibration, KernelCost, kendall_tau, load_calibration
from fuseflow.tuner.judge import Sampling
from fuseflow.tuner.search import Entry, Tuner
from fuseflow.tuner.space import Candidate, SpaceSpec, acyclic, candidate_of

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = str(ROOT / "tests" / "mlir" / "softmax_sparse.mlir")


def _json_of(argv, capsys) -> dict:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


@pytest.mark.slow
def test_gcn_karate_tuned_schedule_beats_presets_and_reproduces(capsys):
    found = _json_of(["tune", "--model", "gcn", "--dataset", "karate", "--budget", "8", "--json"], capsys)
    assert found["verified"] and found["reproduced"] and found["mode"] == "whole"
    assert {p["name"] for p in found["presets"]} >= {"unfused", "partial", "full"}
    assert all(found["cycles"] <= p["cycles"] for p in found["presets"] if p["cycles"] is not None)
    assert found["evaluated"]["simulated"] >= len(found["presets"]) - 1 and found["seconds"] > 0
    again = _json_of(["simulate", "--model", "gcn", "--dataset", "karate", "--schedule", found["schedule"], "--json"],
                     capsys)
    assert again["cycles"] == found["cycles"] and again["verified"]


def test_mlir_tune_api_result():
    program = fuseflow.from_mlir(SOFTMAX)
    result = fuseflow.tune(program, budget=30, max_sims=8)
    assert isinstance(result, fuseflow.TuneResult) and result.verified and result.reproduced
    assert result.evaluated["simulated"] <= 8
    assert fuseflow.Schedule.parse(result.schedule).groups  # a schedule string the grammar reads
    rerun = fuseflow.simulate(program, result.schedule)
    assert rerun.cycles == result.cycles
    data = result.to_json()
    for key in ("schedule", "cycles", "verified", "presets", "evaluated", "seconds", "kendall_tau"):
        assert key in data
    assert data["speedup_interval"] is None  # every run whole: the speedup is exact
    assert all(result.cycles <= p["cycles"] for p in data["presets"] if p["cycles"] is not None)
    assert "tuned" in str(result)


def test_pareto_fronts_are_non_dominated_and_charted(tmp_path, capsys):
    chart = tmp_path / "fronts.png"
    found = _json_of(["tune", SOFTMAX, "--objective", "pareto", "--budget", "30", "--max-sims", "12", "--json",
                      "--plot", str(chart)], capsys)
    assert chart.read_bytes()[:4] == b"\x89PNG"
    assert all(p["max_fifo"] is not None for p in found["presets"] if p["cycles"] is not None)
    for key, against in (("pareto", "traffic_bytes"), ("pareto_buffering", "max_fifo")):
        front = found[key]
        assert front and found["cycles"] == front[0]["cycles"]
        for a, b in zip(front, front[1:]):
            assert a["cycles"] <= b["cycles"] and a[against] > b[against]


def test_fronts_cover_every_simulated_schedule():
    """Every simulated schedule is matched or beaten on both axes by a point of each front, and
    no front point is beaten on both by any simulated schedule."""
    result = fuseflow.tune(fuseflow.from_mlir(SOFTMAX), budget=30, max_sims=10, density=0.3)
    assert len(result.points) >= result.evaluated["simulated"]  # presets that compile alike share a run
    assert {name for p in result.points for name in p.preset.split("/")} >= {"unfused", "partial", "full"}
    for front, key in ((result.pareto, "traffic_bytes"), (result.pareto_buffering, "max_fifo")):
        assert set(front) <= set(result.points)
        for p in result.points:
            assert any(f.cycles <= p.cycles and getattr(f, key) <= getattr(p, key) for f in front)
            assert not any(p.cycles < f.cycles and getattr(p, key) < getattr(f, key) for f in front)


def test_plot_to_a_missing_folder_is_one_line(tmp_path, capsys):
    argv = ["tune", SOFTMAX, "--max-sims", "3", "--plot", str(tmp_path / "no" / "x.png")]
    assert "folder does not exist" in error_of(argv, capsys)


def test_lanes_are_reported_apart(capsys):
    found = _json_of(["tune", SOFTMAX, "--lanes", "2", "--budget", "30", "--max-sims", "14", "--json"], capsys)
    assert found["lanes"] == 2 and found["verified"]
    one = found["best_at_one_lane"]
    assert one is not None and "par" not in one["schedule"] and found["cycles"] <= one["cycles"]
    for item in fuseflow.Schedule.parse(found["schedule"]).pars.values():
        assert all(p <= 2 for _, p in item)


@pytest.mark.parametrize("argv, words", [
    (["tune", SOFTMAX, "--objective", "speed"], "invalid choice"),
    (["tune", SOFTMAX, "--budget", "0"], "must be positive"),
    (["tune", str(ROOT / "tests" / "mlir" / "spmv.mlir")], "has one op"),
    (["tune", SOFTMAX, "--lanes", "0"], "at least 1"),
    (["tune", "--calibrate", SOFTMAX], "takes no model"),
])
def test_bad_input_is_one_line(argv, words, capsys):
    assert words in error_of(argv, capsys)


def test_api_refuses_bad_objective_and_budget():
    program = fuseflow.from_mlir(SOFTMAX)
    with pytest.raises(fuseflow.UserError, match="objective"):
        fuseflow.tune(program, objective="speed")
    with pytest.raises(fuseflow.UserError, match="budget"):
        fuseflow.tune(program, budget=0)


def _rows(db: Path) -> list[str]:
    try:
        with sqlite3.connect(db) as conn:
            return [r[0] for r in conn.execute("SELECT schedule FROM runs")]
    except sqlite3.OperationalError:  # being created
        return []


def test_killed_tune_resumes_without_repeating_simulations(tmp_path, capsys):
    db = tmp_path / "tune.db"
    argv = ["tune", SOFTMAX, "--density", "0.3", "--budget", "120", "--db", str(db), "--quiet"]
    process = subprocess.Popen([sys.executable, "-m", "fuseflow", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env={**os.environ, "FUSEFLOW_WORKER": "0"})
    try:
        deadline = time.time() + 90
        while time.time() < deadline and process.poll() is None:
            if db.exists() and len(_rows(db)) >= 6:
                break
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    before = _rows(db)
    assert len(before) >= 6 and len(set(before)) == len(before)
    found = _json_of(argv[:-1] + ["--budget", "3", "--json"], capsys)
    after = _rows(db)
    evaluated = found["evaluated"]
    assert evaluated["resumed"] >= 3  # at least the presets were read from the log
    assert len(after) == len(before) + evaluated["simulated_now"]  # nothing logged was simulated again
    assert len(set(after)) == len(after) and set(before) <= set(after)
    # the log is a sweep database: `fuseflow plot` reads it
    assert main(["plot", str(db), "--no-charts"]) == 0


def test_resumed_rows_are_not_simulated_again(tmp_path):
    """In process: a tune stopped after some simulations, rerun with the same log, simulates
    none of them again (each simulation the rerun starts is of a schedule not in the log)."""
    ctx = TuneContext.from_program(fuseflow.from_mlir(SOFTMAX))
    from fuseflow.tuner.log import TuneLog

    first = Tuner(ctx, budget=60, max_sims=6, log=TuneLog(str(tmp_path / "t.db"), "p", "d", 0), final_check=False)
    first.run()
    logged = set(_rows(tmp_path / "t.db"))
    ran = []
    second = Tuner(ctx, budget=60, max_sims=12, log=TuneLog(str(tmp_path / "t.db"), "p", "d", 0),
                   simulate=lambda entry: ran.append(entry.schedule) or ctx.simulate(entry.schedule),
                   final_check=False)
    second.run()
    assert ran and not set(ran) & logged and second.resumed >= 3


def test_space_candidates_and_calibration():
    ctx = TuneContext.from_program(fuseflow.from_mlir(SOFTMAX))
    cand = candidate_of(fuseflow.Schedule.parse("fusion=[m,E][s,O] order.1=i,j layout=induced"), ctx.canonical)
    assert cand == Candidate((("m", "E"), ("s", "O")), "induced", ((1, ("i", "j")),))
    assert fuseflow.Schedule.parse(cand.schedule).orders[1].vars == ("i", "j")
    assert acyclic(ctx.graph, [["m", "E", "s", "O"]]) and not acyclic(ctx.graph, [["m", "O"], ["E", "s"]])
    calibration = load_calibration()
    assert not calibration.is_identity and calibration.fitted["kernels"] > 100  # stored with the project
    assert Calibration.from_json(calibration.to_json()) == calibration
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert kendall_tau([1, 2], [2, 1]) is None


def test_no_enumeration_past_the_limit_walks_from_the_presets():
    ctx = TuneContext.from_program(fuseflow.from_mlir(SOFTMAX))
    tuner = Tuner(ctx, budget=30, max_sims=6, spec=SpaceSpec(max_groupings=3), final_check=False)
    result = tuner.run()
    assert result.evaluated["space"]["mode"] == "moves from the presets" and result.verified


SAMPLE_ALL = Sampling(above=0, min_width=1, whole_below=0)  # the 16-row test programs: windows of one row


def _sampled_entry(schedule: str, costs, kernel_cycles, halves, top: int) -> Entry:
    row = SimRow(schedule, cycles=sum(kernel_cycles), verified=True, kernel_cycles=list(kernel_cycles),
                 kernel_words=[0] * len(costs), mode="sampled",
                 cycles_low=sum(kernel_cycles) - sum(halves), cycles_high=sum(kernel_cycles) + sum(halves),
                 kernel_low=[c - h for c, h in zip(kernel_cycles, halves)],
                 kernel_high=[c + h for c, h in zip(kernel_cycles, halves)])
    return Entry(None, schedule, "grouping", costs=list(costs), sim=row, rung=top)


def test_sampled_candidate_replaces_the_incumbent_only_when_the_paired_interval_says_faster():
    """A kernel both candidates share cancels: 10 cycles faster in the kernel they differ by is
    sure (paired half-width 9.4) though their own intervals overlap; 2 cycles faster is not."""
    tuner = Tuner(TuneContext.from_program(fuseflow.from_mlir(SOFTMAX)), sampling=SAMPLE_ALL)
    top = tuner.sampling.top
    shared, a, b, c = (KernelCost(i, (name,)) for i, name in enumerate(["s", "a", "b", "c"]))
    incumbent = _sampled_entry("inc", [shared, a], [1000, 100], [100, 5], top)
    tuner.known.learn(incumbent.costs, incumbent.sim)
    tuner._judge(incumbent)
    assert tuner.incumbent is incumbent
    close = _sampled_entry("close", [shared, c], [1000, 98], [100, 8], top)
    tuner.known.learn(close.costs, close.sim)
    tuner._judge(close)
    assert tuner.incumbent is incumbent  # -2 +- 9.4: not sure
    faster = _sampled_entry("faster", [shared, b], [1000, 90], [100, 8], top)
    tuner.known.learn(faster.costs, faster.sim)
    assert faster.sim.cycles_low < incumbent.sim.cycles_high  # unpaired, the intervals overlap
    tuner._judge(faster)
    assert tuner.incumbent is faster  # -10 +- 9.4
    loose = _sampled_entry("loose", [shared, KernelCost(4, ("d",))], [1000, 10], [100, 8], top - 1)
    tuner.known.learn(loose.costs, loose.sim)
    tuner._judge(loose)
    assert tuner.incumbent is faster  # only the last rung (or a whole run) takes the incumbent's place


def test_sampled_tune_halves_and_ends_on_a_verified_sampled_run():
    ctx = TuneContext.from_program(fuseflow.from_mlir(SOFTMAX), density=0.3)
    tuner = Tuner(ctx, budget=60, max_sims=16, sampling=SAMPLE_ALL)
    result = tuner.run()
    evaluated = result.evaluated
    rungs = evaluated["sampled"]
    assert rungs["10%"] > rungs["2%"] >= 1 and evaluated["promoted"] >= 1  # (a tight +-10% skips +-5%)
    assert sum(rungs.values()) + evaluated["whole"] == evaluated["simulated"]
    assert result.mode == "sampled" and result.verified and result.reproduced  # the final run: the last rung's plan
    assert result.cycles_low <= result.cycles <= result.cycles_high
    whole = fuseflow.simulate(ctx.program, result.schedule, ctx.data)
    assert result.cycles_low <= whole.cycles <= result.cycles_high
    data = result.to_json()
    assert data["cycles_low"] == result.cycles_low and data["mode"] == "sampled"
    low, high = data["speedup_interval"]
    assert low <= data["speedup_over_best_preset"] <= high and low < high
    assert "sampled" in str(result)
    best = min((e for e in tuner._simulated() if e.origin == "preset"), key=lambda e: e.sim.cycles)
    winner = tuner.entries[result.schedule]
    assert winner is best or tuner._surely_better(winner, best)
    assert any(p.cycles_low is not None for p in result.points)


def test_sampled_rows_resume_from_the_log_at_their_level(tmp_path):
    from fuseflow.tuner.log import TuneLog

    ctx = TuneContext.from_program(fuseflow.from_mlir(SOFTMAX), density=0.3)
    first = Tuner(ctx, budget=60, max_sims=8, sampling=SAMPLE_ALL, final_check=False,
                  log=TuneLog(str(tmp_path / "t.db"), "p", "d", 0))
    first.run()
    with sqlite3.connect(tmp_path / "t.db") as conn:
        logged = set(conn.execute("SELECT schedule, data FROM runs WHERE mode = 'sampled'"))
    assert logged and all("sampled error=" in data for _, data in logged)
    ran = []
    simulate = ctx.simulate
    ctx.simulate = lambda text, *a, sample=None, **k: ran.append((text, sample)) or simulate(text, *a, sample=sample,
                                                                                               **k)
    second = Tuner(ctx, budget=60, max_sims=8, sampling=SAMPLE_ALL, final_check=False,
                   log=TuneLog(str(tmp_path / "t.db"), "p", "d", 0))
    result = second.run()
    assert second.resumed >= 8 and not ran  # everything the first ran, read back at its level
    assert result.mode == "sampled" and result.cycles_low is not None


def test_scheduler_evaluates_on_the_cluster_and_agrees(capsys):
    pytest.importorskip("distributed")
    found = _json_of(["tune", SOFTMAX, "--density", "0.3", "--budget", "60", "--max-sims", "10",
                      "--scheduler", "local", "--workers", "2", "--json"], capsys)
    evaluated = found["evaluated"]
    assert evaluated["simulated"] <= 10 and evaluated["on_cluster"] == evaluated["simulated_now"] >= 5  # all there
    assert found["verified"] and found["reproduced"]  # the final run, here, agrees with the worker's
    assert all(found["cycles"] <= p["cycles"] for p in found["presets"] if p["cycles"] is not None)


def test_unreachable_scheduler_is_one_line(capsys):
    pytest.importorskip("distributed")
    assert "dask scheduler" in error_of(["tune", SOFTMAX, "--scheduler", "bogus", "--max-sims", "3"], capsys)
