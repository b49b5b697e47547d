"""A suite tuned row by row (`fuseflow study suite ... --tune SECONDS`): each case row's answer is
a verified schedule no slower than the best preset, stored in the suite database, shown on the
page, and a rerun resumes instead of tuning again; a row nothing of which can be evaluated is
recorded with its reason, not failed silently."""
from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict

import fuseflow
from fuseflow.cli import main
from fuseflow.studies.db import SweepDB
from fuseflow.studies.suite.spec import parse_suite
from fuseflow.studies.suite.tuned import TuneTask, log_path, tune_tasks, tuned_lines, tuned_rows
from fuseflow.tuner.context import TuneContext
from fuseflow.tuner.judge import Sampling
from fuseflow.tuner.search import Tuner
from fuseflow.tuner.suite import run_tune_task, run_tunes

SUITE = """
[suite]
name = "tiny"
schedules = ["unfused", "partial", "full"]
[[case]]
model = "gcn"
datasets = ["karate"]
"""


def test_tuned_suite_row_beats_presets_resumes_and_is_on_the_page(tmp_path, capsys):
    suite_file = tmp_path / "tiny.toml"
    suite_file.write_text(SUITE)
    db, page = str(tmp_path / "tiny.db"), str(tmp_path / "page.md")
    argv = ["study", "suite", str(suite_file), "--db", db, "--executor", "serial", "--tune", "6", "--page", page]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "tuned gcn karate:" in err and "1 rows tuned" in err
    suite = parse_suite(SUITE, "tiny.toml")
    store = SweepDB(db, readonly=True)
    (row,) = tuned_rows(store, suite)
    store.close()
    assert row.status == "ok" and row.verified and row.reproduced and row.mode == "whole"
    presets = {p["name"]: p["cycles"] for p in row.presets}
    assert row.cycles <= min(c for c in presets.values() if c)
    assert row.best_cycles == min(c for c in presets.values() if c) and row.speedup >= 1.0
    # the suite's presets were taken as the suite ran them, the model's others simulated by the tune;
    # a tune that simulates them itself (no suite database) gets the suite's cycles: the same footing
    suite_rows = {r.schedule: r.cycles for r in SweepDB(db, readonly=True).rows() if r.suite == "tiny"}
    assert {p: presets[p] for p in suite_rows} == suite_rows and presets["layer1"] > 0
    alone = json.loads(run_tune_task(asdict(tune_tasks(suite)[0]), 2, None)["result"])
    assert {p["name"]: p["cycles"] for p in alone["presets"]} == presets
    assert alone["evaluated"]["presets_given"] == [] and sorted(suite_rows) == \
        sorted(json.loads(sqlite3.connect(db).execute("SELECT result FROM suite_tuned").fetchone()[0])
               ["evaluated"]["presets_given"])
    assert fuseflow.simulate(fuseflow.model("gcn", dataset="karate").program, row.schedule,
                             fuseflow.model("gcn", dataset="karate").inputs).cycles == row.cycles
    text = open(page).read()
    assert "Tuned (1 of 1 rows" in text and f"`{row.schedule}`" in text and f"{row.cycles:,}" in text
    # a rerun resumes: nothing tuned again, the search log untouched
    logged = sqlite3.connect(log_path(db)).execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    assert main(argv) == 0
    assert "0 rows tuned, 0 not, 1 done before" in capsys.readouterr().err
    assert sqlite3.connect(log_path(db)).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == logged


def test_a_row_that_cannot_be_evaluated_is_recorded_with_its_reason(tmp_path):
    suite = parse_suite(SUITE.replace('datasets = ["karate"]', 'datasets = ["karate"]\nmax_tokens = 1'),
                        "tiny.toml")
    (task,) = tune_tasks(suite)
    assert task.max_tokens == 1 and task.key == ("model:gcn", "dataset=karate", 0)
    db = str(tmp_path / "t.db")
    summary = run_tunes(suite, db, 5)
    assert (summary.tuned, summary.failed) == (0, 1)
    store = SweepDB(db, readonly=True)
    (row,) = tuned_rows(store, suite)
    store.close()
    assert row.status == "error" and "no candidate could be evaluated" in row.error and "too large" in row.error
    line = tuned_lines([row], suite.labels)[-1]
    assert line.startswith("| GCN | karate |") and "not tuned: tune: no candidate could be evaluated" in line


def test_sampled_candidates_whose_whole_run_kernels_are_too_long_are_only_estimated():
    ctx = TuneContext.from_program(fuseflow.from_mlir("tests/mlir/shared_filter.mlir"))
    tuner = Tuner(ctx, budget=5, max_sims=3, final_check=False, sampling=Sampling(above=1e-9))
    entry = tuner.add(None, "preset", schedule=ctx.presets["unfused"], label="unfused")
    assert entry.too_large.startswith("too large to evaluate: its kernels of fewer than 64 windows")
    assert entry not in tuner._open()
    assert Sampling(above=1e12).too_large(tuner._compile(entry.schedule), entry.costs, None) is None
    assert TuneTask("gpt3-bigbird", "small2", 16, tiled=False).data == "dataset=small2 block=16 scalar"
