"""The resident worker (FUSEFLOW_WORKER=1, cmdline.resident and worker) is the command it runs:
the same probe, tests/worker_probe.py (a PyTorch module file whose import records the process it
runs in), reads the same in a process of its own and handed to the worker: umask and the mode of
a file it writes, nice, CPU affinity, every rlimit, environment (TZ included), signal dispositions
(ignored SIGHUP and SIGINT survive) and mask, inherited descriptors and no others; SIGTERM ends
both by SIGTERM; a client killed with SIGKILL takes its fork with it within a second; commands
that do not simulate start nothing. One worker serves the module (it takes a few seconds to start)."""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from fuseflow.cmdline import resident

ROOT = Path(__file__).resolve().parents[1]
SIMULATE = ["simulate", "tests/mlir/spmv.mlir", "--schedule", "full", "--density", "0.2", "--seed", "3"]
PROBE = ["simulate", "tests/worker_probe.py:Net", "--input", "4x4"]
START_S = 180  # the longest wait for the worker (importing and loading kernels, on a loaded machine)

pytestmark = [pytest.mark.slow,  # starts a worker and runs the probe in processes (about 40 s in all)
              pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"),
                                 reason="the resident worker needs Linux (pidfds, SO_PEERCRED, /proc)")]


@dataclass
class Worker:
    pid: int
    env: dict
    first: subprocess.CompletedProcess  # the SIMULATE that ran in its own process and started the worker


def _fuseflow(argv, env, flags=()):
    return subprocess.run([sys.executable, "-m", "fuseflow", *flags, *argv], cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)


def _table(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if not line.startswith("outputs verified")]


@pytest.fixture(scope="module")
def worker():
    folder = Path(tempfile.mkdtemp(prefix="ff", dir="/tmp"))  # a socket's path is short (108 bytes)
    env = {**os.environ, resident.ENV: "1", "XDG_RUNTIME_DIR": str(folder)}
    first = _fuseflow(SIMULATE, env)
    assert first.returncode == 0, first.stderr
    path = folder / f"fuseflow-worker-{os.getuid()}" / f"{resident.install_key()}.sock"
    deadline = time.monotonic() + START_S
    while not path.exists():
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.2)
    pid = int(Path(f"{path}.lock").read_text().split()[0])
    yield Worker(pid, env, first)
    os.kill(pid, signal.SIGTERM)
    shutil.rmtree(folder)


def test_a_command_handed_over_prints_and_exits_as_in_its_own_process(worker):
    handed = _fuseflow(SIMULATE, worker.env, ["--debug"])
    assert handed.returncode == 0 and f"handed to the resident worker (pid {worker.pid})" in handed.stderr
    assert _table(handed.stdout) == _table(worker.first.stdout) and "verified" in handed.stdout
    missing = _fuseflow(["simulate", "missing.mlir"], worker.env)
    alone = _fuseflow(["simulate", "missing.mlir"], {**worker.env, resident.ENV: "0"})
    assert (missing.returncode, missing.stderr) == (2, alone.stderr) and "no such MLIR file" in alone.stderr
    with ThreadPoolExecutor(4) as pool:  # concurrent clients: each its own output
        together = list(pool.map(lambda _: _fuseflow(SIMULATE, worker.env), range(4)))
    assert all(r.returncode == 0 and _table(r.stdout) == _table(worker.first.stdout) for r in together)


def test_a_variable_read_at_import_keeps_the_command_in_its_own_process(worker):
    result = _fuseflow(["simulate", "missing.mlir"], {**worker.env, "NUMBA_NUM_THREADS": "1"}, ["--debug"])
    assert result.returncode == 2 and "no such MLIR file" in result.stderr
    assert "running in this process, not in the resident worker: NUMBA_NUM_THREADS differ" in result.stderr


def test_help_version_and_usage_errors_start_no_worker():
    folder = Path(tempfile.mkdtemp(prefix="ff", dir="/tmp"))
    env = {**os.environ, resident.ENV: "1", "XDG_RUNTIME_DIR": str(folder)}
    try:
        for argv, status in ((["simulate", "--help"], 0), (["--version", "simulate"], 0),
                             (["simulate", "x.mlir", "--density", "2"], 2)):
            assert _fuseflow(argv, env).returncode == status
        assert not any(folder.iterdir())  # no socket folder: nothing was started or looked for
    finally:
        shutil.rmtree(folder)


def _unusual_process() -> None:
    """In the client before it starts: attributes unlike the worker's (which pytest's process has)."""
    os.umask(0o077)
    os.nice(3)
    cpus = os.sched_getaffinity(0)
    if len(cpus) > 1:
        os.sched_setaffinity(0, {min(cpus)})
    for limit, value in ((resource.RLIMIT_NOFILE, 900), (resource.RLIMIT_FSIZE, 1 << 34),
                         (resource.RLIMIT_CPU, 3000)):
        hard = resource.getrlimit(limit)[1]
        resource.setrlimit(limit, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a script's background job
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})


def _start_probe(env: dict, out: Path, hold: Path, **popen) -> subprocess.Popen:
    hold.touch()
    return subprocess.Popen([sys.executable, "-m", "fuseflow", *PROBE], cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**env, "PROBE_OUT": str(out), "PROBE_HOLD": str(hold)}, **popen)


def _probed(out: Path, proc: subprocess.Popen) -> dict:
    """The probe's record once the command has written it (it then waits while its hold file exists)."""
    deadline = time.monotonic() + 120
    while not out.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the probe did not run"
        time.sleep(0.05)
    return json.loads(out.read_text())


def _signalled_probe(env: dict, folder: Path, pipe: int) -> tuple[dict, subprocess.Popen]:
    """The probe under `_unusual_process`, sent SIGHUP and SIGINT (which it ignores) and then SIGTERM."""
    out = folder / "probe.json"
    proc = _start_probe(env, out, folder / "hold", preexec_fn=_unusual_process, pass_fds=[pipe])
    record = _probed(out, proc)
    out.unlink()
    for sig in (signal.SIGHUP, signal.SIGINT):
        proc.send_signal(sig)
    time.sleep(0.5)
    alive = proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    return {**record, "alive after SIGHUP and SIGINT": alive, "returncode": proc.returncode}, proc


def test_the_probe_reads_the_same_in_its_own_process_and_in_the_worker(worker, tmp_path):
    env = {**worker.env, "TZ": "America/New_York", "PROBE_VAR": "ü 1"}
    read, write = os.pipe()  # an inherited descriptor (the command holds it as at home)
    try:
        home, _ = _signalled_probe({**env, resident.ENV: "0"}, tmp_path, write)
        handed, _ = _signalled_probe(env, tmp_path, write)
    finally:
        os.close(read)
        os.close(write)
    assert home.pop("ppid") == os.getpid() and handed.pop("ppid") == worker.pid  # it ran in the worker's fork
    home.pop("pid")
    handed.pop("pid")
    assert handed == home
    assert home["returncode"] == -signal.SIGTERM and home["alive after SIGHUP and SIGINT"]
    assert home["written mode"] == 0o600 and home["signals"]["SIGHUP"] == "ignored" and home["blocked"] == ["SIGUSR1"]
    assert len(home["descriptors"]) == 5 and home["descriptors"][str(write)] == "pipe"  # 0-2, the pipe, the probe's


def test_a_client_killed_takes_its_command_with_it(worker, tmp_path):
    first = _start_probe(worker.env, tmp_path / "a.json", tmp_path / "hold")
    second = _start_probe(worker.env, tmp_path / "b.json", tmp_path / "hold")
    try:
        fork = _probed(tmp_path / "a.json", first)["pid"]
        other = _probed(tmp_path / "b.json", second)
        assert other["ppid"] == worker.pid
        assert not [what for what in other["descriptors"].values()  # the worker's and the other command's
                    if what.startswith(("socket:", "anon_inode:")) or what.endswith(".lock")]
        first.kill()
        deadline = time.monotonic() + 1.0
        while os.path.exists(f"/proc/{fork}") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not os.path.exists(f"/proc/{fork}"), "the killed client's command still runs"
        assert second.poll() is None
        (tmp_path / "hold").unlink()
        stdout, stderr = second.communicate(timeout=120)
        assert second.returncode == 0 and "verified" in stdout, stderr
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
