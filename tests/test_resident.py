"""The resident worker (cmdline.resident, worker): a first `simulate` runs in its own process and
starts a worker; the next is handed to it (the client imports no numba) with the same output
and exit status, errors included; FUSEFLOW_WORKER=0 and a memory limit keep commands at home."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from fuseflow.cmdline import resident
from fuseflow.worker import exit_status

ROOT = Path(__file__).resolve().parents[1]
SIMULATE = ["simulate", "tests/mlir/spmv.mlir", "--schedule", "full", "--density", "0.2", "--seed", "3"]


def _fuseflow(argv, env, flags=()):
    return subprocess.run([sys.executable, *flags, "-m", "fuseflow", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def _socket_in(folder: Path) -> Path:
    return folder / f"fuseflow-worker-{os.getuid()}" / f"{resident.install_key()}.sock"


def _await(path: Path, seconds: float = 90) -> int:
    """The pid of the worker once it listens at `path`."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.2)
    return int(Path(f"{path}.lock").read_text().split()[0])


def _table(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if not line.startswith("outputs verified")]


def test_commands_are_handed_to_the_worker_the_first_one_starts():
    folder = Path(tempfile.mkdtemp(prefix="ff", dir="/tmp"))  # a socket's path is short (108 bytes)
    env = {**os.environ, resident.ENV: "1", "XDG_RUNTIME_DIR": str(folder)}
    first = _fuseflow(SIMULATE, env)
    assert first.returncode == 0, first.stderr
    pid = _await(_socket_in(folder))
    try:
        handed = _fuseflow(SIMULATE, env, ("-X", "importtime"))
        assert handed.returncode == 0, handed.stderr
        assert _table(handed.stdout) == _table(first.stdout) and "verified" in handed.stdout
        assert "numba" not in handed.stderr and "scipy" not in handed.stderr  # the client only
        missing = _fuseflow(["simulate", "missing.mlir"], env)
        alone = _fuseflow(["simulate", "missing.mlir"], {**env, resident.ENV: "0"})
        assert (missing.returncode, missing.stderr) == (2, alone.stderr) and "no such MLIR file" in alone.stderr
        at_home = _fuseflow(SIMULATE, {**env, resident.ENV: "0"}, ("-X", "importtime"))
        assert at_home.returncode == 0 and "numba" in at_home.stderr
    finally:
        os.kill(pid, signal.SIGTERM)
        shutil.rmtree(folder)


def test_what_goes_to_the_worker():
    assert resident.wanted(["--debug", "simulate", "x.mlir"], {})
    assert not resident.wanted(["simulate", "x.mlir"], {resident.ENV: "off"})
    assert not resident.wanted(["compile", "x.mlir"], {}) and not resident.wanted([], {})
    assert resident.hand_over(["--version"], "/nonexistent/fuseflow.sock") is None  # no worker: run at home


@pytest.mark.parametrize("code, status", [(0, 0), (2, 2), (-signal.SIGKILL, 137)])
def test_exit_status_as_a_shell_reports_it(code, status):
    assert exit_status(code) == status
