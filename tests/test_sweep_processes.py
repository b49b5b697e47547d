"""Clean process trees: the workers of `sweep --jobs 2` end when their sweep is killed with
SIGKILL, which runs no cleanup in the parent."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
BATCH = str(ROOT / "tests" / "mlir" / "batch_matmul.mlir")


@pytest.mark.slow
def test_workers_end_with_a_killed_sweep(tmp_path):
    argv = [sys.executable, "-m", "fuseflow", "sweep", BATCH, "-g", "full layout=induced", "--orders", "all",
            "--density", "0.05,0.2,0.35,0.5,0.65", "--engine", "oracle", "--jobs", "2", "-q",
            "--db", str(tmp_path / "s.db")]
    sweep = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = []
    try:
        parent = psutil.Process(sweep.pid)
        deadline = time.time() + 120
        while len(workers) < 2 and sweep.poll() is None and time.time() < deadline:
            workers = parent.children(recursive=True)
            time.sleep(0.05)
        assert len(workers) >= 2, "the sweep did not start its workers"
        time.sleep(1.0)  # let the workers take tasks
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait()
        gone, alive = psutil.wait_procs(workers, timeout=15)
        assert not alive, f"workers outlived their sweep: {[p.pid for p in alive]}"
    finally:  # whatever happened, end what this test started
        if sweep.poll() is None:
            sweep.kill()
        for worker in workers:
            if worker.is_running():
                worker.kill()
