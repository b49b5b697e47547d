"""`fuseflow sweep` / `fuseflow plot`: database rows, resuming (also after SIGKILL), failures,
TOML files, the model hook, and bad input."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import types

import pytest

from fuseflow import cli as fuseflow_cli
from fuseflow.errors import UserError
from fuseflow.studies.db import SweepDB
from fuseflow.studies.runner import SweepSpec, run_sweep

HERE = os.path.dirname(__file__)
ROOT = os.path.dirname(HERE)
SPMV = os.path.join(HERE, "mlir", "spmv.mlir")
BATCH = os.path.join(HERE, "mlir", "batch_matmul.mlir")
MATMUL_CHAIN = os.path.join(HERE, "mlir", "matmul_chain.mlir")
RESULT = ("program", "schedule", "data", "seed", "status", "cycles", "flops", "bytes", "verified", "label")


def rows_of(db: str) -> list:
    database = SweepDB(db)
    try:
        return database.rows()
    finally:
        database.close()


def results(rows) -> set:
    return {tuple(getattr(r, k) for k in RESULT) for r in rows}


def sweep(*argv) -> int:
    return fuseflow_cli.main(["sweep", *argv])


def test_sweep_writes_rows_and_resumes(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    args = [SPMV, "-g", "full layout=induced", "-g", "unfused", "--orders", "all", "--density", "0.1,0.3",
            "--seed", "0", "--seed", "1", "--engine", "oracle", "--db", db]
    assert sweep(*args) == 0
    rows = rows_of(db)
    # spmv: one op, so unfused and full are one kernel; induced layouts open a second order (the
    # default is j,i: equal size cost, and the 48 columns outside the 64 rows walk less)
    assert {r.schedule for r in rows} == {"full layout=induced", "full layout=induced order.0=i,j"}
    assert len(rows) == 2 * 2 * 2
    assert {r.data for r in rows} == {"density=0.1", "density=0.3"}
    for r in rows:
        assert r.status == "ok" and r.verified == 1 and r.cycles > 0 and r.error is None
        assert r.bytes == 4 * (r.mem_reads + r.mem_writes) and r.est_cycles > 0
        assert r.wall_seconds > 0 and r.engine == "oracle" and r.program == os.path.normpath(SPMV)
    err = capsys.readouterr().err
    assert "8 to simulate" in err and "100%" not in err  # the bar is drawn on a terminal only
    assert sweep(*args, "-q") == 0  # resume: nothing left to do
    assert rows_of(db) == rows
    assert sweep(*args, "--density", "0.5", "-q") == 0  # a new data point adds rows only for it
    assert len(rows_of(db)) == 12 and rows_of(db)[:8] == rows


def test_failures_are_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    import fuseflow.studies.runner as runner  # the module whose `simulate` the sweep calls

    real = runner.simulate

    def flaky(program, schedule, *a, **k):
        if "order.0=i,j" in str(schedule):
            raise RuntimeError("simulator exploded\nsecond line")
        return real(program, schedule, *a, **k)

    monkeypatch.setattr(runner, "simulate", flaky)
    db = str(tmp_path / "f.db")
    summary = run_sweep(SweepSpec([SPMV], ["fusion=[nope]", "full layout=induced"], orders="all",
                                  densities=[0.2], engine="oracle", db=db), progress=False)
    rows = {r.schedule: r for r in rows_of(db)}
    assert summary.failed == 2 and summary.simulated == 2
    assert rows["fusion=[nope]"].status == "error"
    assert "names 'nope', which no op produces" in rows["fusion=[nope]"].error
    bad = rows["full layout=induced order.0=i,j"]
    assert bad.status == "error" and bad.error == "RuntimeError: simulator exploded" and bad.cycles is None
    assert rows["full layout=induced"].status == "ok"


def test_block_sparse_data_points(tmp_path):
    db = str(tmp_path / "b.db")
    assert sweep(MATMUL_CHAIN, "-g", "full layout=induced order=i,l,k,j", "--density", "0.25", "--block", "1",
                 "--block", "4", "--engine", "oracle", "--db", db, "-q") == 0
    rows = rows_of(db)
    assert [r.data for r in rows] == ["density=0.25 block=1", "density=0.25 block=4"]
    assert rows[0].cycles != rows[1].cycles and all(r.verified for r in rows)


def test_toml_config_and_flag_override(tmp_path):
    config = tmp_path / "sweep.toml"
    program = os.path.relpath(SPMV, tmp_path)
    config.write_text(f'[sweep]\nprogram = "{program}"\ngranularities = ["full layout=induced"]\n'
                      f'orders = "all"\ndensities = [0.2]\nseeds = [3]\nengine = "oracle"\ndb = "from-toml.db"\n')
    assert sweep("--config", str(config), "-q") == 0
    rows = rows_of(str(tmp_path / "from-toml.db"))
    assert len(rows) == 2 and {r.seed for r in rows} == {3}
    other = str(tmp_path / "flag.db")
    assert sweep("--config", str(config), "--db", other, "--density", "0.4", "--orders", "default", "-q") == 0
    assert [r.data for r in rows_of(other)] == ["density=0.4"]


@pytest.mark.parametrize("argv, message", [
    ([], "no program to sweep"),
    (["no-such.mlir"], "no such MLIR file"),
    ([SPMV, "--scheduler", "tcp://127.0.0.1:8786"], "--scheduler needs --executor dask"),
    ([SPMV, "--density", "2"], "outside (0, 1]"),
    ([SPMV, "--density", "x"], "not a number"),
    ([SPMV, "--prune", "0.5"], "at least 1"),
    ([SPMV, "--shape", "A=6y6"], "NAME=AxB"),
    ([SPMV, "-g", "fusion=[a"], "cannot read groups"),
])
def test_bad_input_raises_user_error(argv, message, tmp_path):
    args = fuseflow_cli.build_parser().parse_args(["sweep", *argv, "--db", str(tmp_path / "x.db"), "-q"])
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace("[", r"\[")):
        args.run(args)


def test_bad_toml(tmp_path, capsys):
    config = tmp_path / "bad.toml"
    config.write_text('programs = ["x.mlir"]\nspeed = 3\n')
    assert sweep("--config", str(config)) == 2
    assert "unknown key 'speed'" in capsys.readouterr().err
    config.write_text("programs = [\n")
    assert sweep("--config", str(config)) == 2
    assert "not valid TOML" in capsys.readouterr().err


def test_model_hook_missing(monkeypatch, tmp_path):
    import fuseflow.models
    import fuseflow.studies.space as space

    monkeypatch.setitem(sys.modules, "fuseflow.models.registry", None)  # import fails
    monkeypatch.delattr(fuseflow.models, "registry", raising=False)

    space._model_case.cache_clear()
    with pytest.raises(UserError, match="built-in models are not available"):
        run_sweep(SweepSpec(["model:gcn"], db=str(tmp_path / "m.db")), progress=False)


def test_model_hook(monkeypatch, tmp_path):
    """A model comes from fuseflow.models.registry.build(name, dataset=..), with its presets."""
    import fuseflow
    import fuseflow.studies.space as space

    program = fuseflow.from_mlir(SPMV)
    calls = []

    def build(name, dataset=None, *, seed=0, scale=1.0, density=0.1, block=16):  # registry.build's
        calls.append((name, dataset, seed))
        if name != "spmv":
            raise UserError(f"unknown model {name!r}")
        data = fuseflow.random_inputs(program, density=0.3 if dataset == "dense" else 0.05, seed=seed)
        return types.SimpleNamespace(program=program, inputs=data,
                                     presets={"unfused": "unfused", "full": "full layout=induced"})

    fake = types.ModuleType("fuseflow.models.registry")
    fake.build = build
    monkeypatch.setitem(sys.modules, "fuseflow.models.registry", fake)
    import fuseflow.models

    monkeypatch.setattr(fuseflow.models, "registry", fake, raising=False)
    space._model_case.cache_clear()
    db = str(tmp_path / "m.db")
    assert sweep("model:spmv", "-g", "full", "--dataset", "sparse", "--dataset", "dense", "--engine", "oracle",
                 "--db", db, "-q") == 0
    rows = rows_of(db)
    assert [(r.program, r.schedule, r.data, r.label) for r in rows] == [
        ("model:spmv", "full layout=induced", "dataset=sparse", "full"),
        ("model:spmv", "full layout=induced", "dataset=dense", "full")]
    assert rows[0].flops < rows[1].flops
    assert ("spmv", "sparse", 0) in calls
    space._model_case.cache_clear()
    assert sweep("model:nope", "--db", db, "-q") == 2
    space._model_case.cache_clear()


@pytest.mark.slow
def test_plot(tmp_path, capsys):
    db = str(tmp_path / "p.db")
    assert sweep(BATCH, "-g", "full layout=induced", "--orders", "all", "--max-orders", "6", "--density", "0.3",
                 "--engine", "oracle", "--db", db, "-q") == 0
    capsys.readouterr()
    out_dir = str(tmp_path / "charts")
    assert fuseflow_cli.main(["plot", db, "-o", out_dir, "--factors", "1.5,2"]) == 0
    text = capsys.readouterr().out
    assert "spearman" in text and "prune factor" in text and "wrote 2 charts" in text
    assert sorted(os.listdir(out_dir)) == ["cycles-0.png", "heuristic-vs-simulated.png"]
    assert all(os.path.getsize(os.path.join(out_dir, f)) > 5000 for f in os.listdir(out_dir))
    assert fuseflow_cli.main(["plot", str(tmp_path / "missing.db")]) == 2


def _count(db: str) -> int:
    if not os.path.exists(db):
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not created yet
        return 0


@pytest.mark.slow
def test_sigkill_then_resume_loses_and_duplicates_nothing(tmp_path):
    argv = [sys.executable, "-m", "fuseflow.cli", "sweep", BATCH, "-g", "full layout=induced",
            "--orders", "all", "--density", "0.05,0.2,0.35,0.5,0.65", "--engine", "oracle", "-q"]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    killed = str(tmp_path / "killed.db")
    proc = subprocess.Popen(argv + ["--db", killed], cwd=ROOT, env=env)
    deadline = time.time() + 120
    while _count(killed) < 3 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = rows_of(killed)
    assert 3 <= len(before) < 90, "the sweep must be killed in the middle"
    subprocess.run(argv + ["--db", killed], cwd=ROOT, env=env, check=True, timeout=300)
    after = rows_of(killed)
    clean = str(tmp_path / "clean.db")
    subprocess.run(argv + ["--db", clean], cwd=ROOT, env=env, check=True, timeout=300)
    reference = rows_of(clean)
    assert len(reference) == 90
    keys = [(r.program, r.schedule, r.data, r.seed) for r in after]
    assert len(keys) == len(set(keys)) == 90  # nothing duplicated, nothing missing
    assert after[:len(before)] == before  # finished rows kept exactly as written
    assert results(after) == results(reference)
