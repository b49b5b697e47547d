"""A small suite on a dask LocalCluster of 2 workers gives the serial run's rows (a large-memory
case's tasks all on one worker); a suite killed
with SIGKILL mid-run resumes to the same rows, none lost or written twice, and its workers end
with it. `sweep --executor dask` starts a local cluster when no scheduler is given."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from fuseflow.studies.db import SweepDB
from fuseflow.studies.runner import SweepSpec, run_sweep
from fuseflow.studies.suite.run import run_suite
from fuseflow.studies.suite.spec import parse_suite

pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[1]
SMALL = """
[suite]
name = "small"
schedules = ["unfused", "partial", "full"]
[[case]]
model = "sae"
datasets = ["small"]
[[case]]
model = "gcn"
datasets = ["karate"]
large_memory = true
[[case]]
model = "gpt3-bigbird"
datasets = ["tiny"]
blocks = [16]
"""
# what a row says about its schedule (not when or where it ran)
RESULT = ("program", "schedule", "data", "seed", "label", "status", "kernels", "cycles", "flops", "mem_reads",
          "mem_writes", "verified", "est_cycles", "est_flops", "est_mem", "reason", "error", "schedule_text",
          "suite")


def rows(path: str) -> dict:
    db = SweepDB(path, readonly=True)
    try:
        return {(r.program, r.schedule, r.data, r.seed): tuple(getattr(r, k) for k in RESULT) for r in db.rows()}
    finally:
        db.close()


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("serial") / "serial.db")
    summary = run_suite(parse_suite(SMALL, "small.toml"), path, executor="serial", progress=False)
    assert summary.simulated == 9
    return rows(path)


@pytest.mark.slow
def test_local_cluster_of_two_gives_the_serial_rows(serial, tmp_path):
    path = str(tmp_path / "dask.db")
    summary = run_suite(parse_suite(SMALL, "small.toml"), path, executor="dask", workers=2, progress=False)
    assert summary.workers == 2 and summary.simulated == 9
    assert rows(path) == serial
    db = SweepDB(path, readonly=True)
    assert len({r.worker for r in db.rows()}) == 2  # both workers took tasks
    assert len({r.worker for r in db.rows() if r.model == "gcn"}) == 1  # large memory: one lane
    db.close()


@pytest.mark.slow
def test_sigkill_mid_run_resumes_to_the_same_rows(serial, tmp_path):
    suite = tmp_path / "small.toml"
    suite.write_text(SMALL)
    path = str(tmp_path / "killed.db")
    argv = [sys.executable, "-m", "fuseflow", "study", "suite", str(suite), "--db", path, "--workers", "2", "-q"]
    run = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, count, workers = time.time() + 300, 0, []
        while run.poll() is None and count == 0 and time.time() < deadline:
            time.sleep(0.1)
            workers = psutil.Process(run.pid).children(recursive=True) or workers
            if os.path.exists(path):
                try:
                    count = sqlite3.connect(path).execute("SELECT COUNT(*) FROM runs").fetchone()[0]
                except sqlite3.OperationalError:  # the table is being created
                    pass
        assert run.poll() is None, "the suite ended before it could be killed"
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
    finally:
        if run.poll() is None:
            run.kill()
    _, alive = psutil.wait_procs(workers, timeout=20)
    assert not alive, f"workers outlived their suite: {[p.pid for p in alive]}"
    before = rows(path)
    assert 0 < len(before) < 9
    resumed = subprocess.run(argv[:-1] + ["--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert "(0 done before)" not in resumed.stderr and rows(path) == serial
    assert {k: v for k, v in rows(path).items() if k in before} == before  # finished rows were kept as they were
    db = SweepDB(path, readonly=True)
    assert db.count() == 9 and len(db.sessions("small")) == 2
    db.close()


@pytest.mark.slow
def test_sweep_on_a_local_cluster(tmp_path):
    mlir = str(ROOT / "tests" / "mlir" / "batch_matmul.mlir")

    def spec(db, **kw):
        return SweepSpec([mlir], ["full layout=induced"], orders="all", max_orders=4, densities=[0.2],
                         engine="oracle", db=str(tmp_path / db), **kw)

    run_sweep(spec("local.db"), progress=False)
    remote = run_sweep(spec("dask.db", executor="dask", jobs=2), progress=False)
    assert remote.simulated >= 4 and remote.failed == 0

    def results(db):
        database = SweepDB(str(tmp_path / db), readonly=True)
        try:
            return sorted((r.schedule, r.status, r.cycles, r.flops, r.verified) for r in database.rows())
        finally:
            database.close()

    assert results("dask.db") == results("local.db")
