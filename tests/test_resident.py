"""The resident worker's parts, without a worker (tests/test_worker_probes.py runs one): which
command lines go to it (only with FUSEFLOW_WORKER=1, only a `simulate` that parses), the key that
names it (an edit that keeps modification times, a deleted file and another installed version each
change it), the differences that keep a command in its own process, and the peer check on both
ends of the socket."""
from __future__ import annotations

import io
import os
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import time

import pytest

from fuseflow import worker
from fuseflow.cmdline import resident

ON = {resident.ENV: "1"}


def test_what_goes_to_the_worker():
    assert resident.wanted(["--debug", "simulate", "x.mlir"], ON)
    assert not resident.wanted(["simulate", "x.mlir"], {}) and not resident.wanted(["simulate", "x.mlir"], {
        resident.ENV: "0"})
    assert not resident.wanted(["compile", "x.mlir"], ON) and not resident.wanted([], ON)
    for argv in (["simulate", "--help"], ["simulate", "-h"], ["--version", "simulate"], ["simulate", "--depth", "x"]):
        assert not resident.wanted(argv, ON), argv
    assert resident.hand_over(["--version"], "/nonexistent/fuseflow.sock") == resident.NO_WORKER


def test_the_key_follows_the_code_and_the_installed_packages(tmp_path):
    package, site = tmp_path / "pkg", tmp_path / "site"
    package.mkdir()
    site.mkdir()
    (package / "a.py").write_text("x = 1\n")
    (package / "b.py").write_text("y = 1\n")
    (site / "numba-0.60.0.dist-info").mkdir()
    keys = [resident.install_key(str(package), [str(site)])]
    before = os.stat(package / "a.py")
    (package / "a.py").write_text("x = 2\n")  # as `cp -p`, `rsync -t` or `tar x` leave it: the same mtime and size
    os.utime(package / "a.py", ns=(before.st_atime_ns, before.st_mtime_ns))
    keys.append(resident.install_key(str(package), [str(site)]))
    (package / "b.py").unlink()
    keys.append(resident.install_key(str(package), [str(site)]))
    (site / "numba-0.60.0.dist-info").rename(site / "numba-0.61.0.dist-info")
    keys.append(resident.install_key(str(package), [str(site)]))
    (package / "__pycache__").mkdir()  # compiled files and numba's cache do not count
    (package / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"x")
    keys.append(resident.install_key(str(package), [str(site)]))
    assert len(set(keys[:4])) == 4 and keys[4] == keys[3]


def test_what_keeps_a_command_in_its_own_process(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO()))  # pytest's has no encoding
    state = resident.process_state(["simulate", "x.mlir"])
    state = {**state, "env": dict(worker.BASE_ENVIRONMENT)}  # this process as the worker
    assert worker.refusal(state) is None
    assert "NUMBA_NUM_THREADS" in worker.refusal({**state, "env": {**state["env"], "NUMBA_NUM_THREADS": "1"}})
    assert "PYTHONHASHSEED" in worker.refusal({**state, "env": {**state["env"], "PYTHONHASHSEED": "7"}})
    assert worker.refusal({**state, "env": {**state["env"], "TZ": "Asia/Tokyo", "HOME": "/x"}}) is None  # read later
    assert "options" in worker.refusal({**state, "flags": [*state["flags"][:2], {"importtime": True}]})
    other = {**state["identity"], "cgroup": "0::/elsewhere\n"}
    assert "cgroup differ" in worker.refusal({**state, "identity": other})


def _as_stranger(act) -> int:
    """Run `act()` in a fork of this process as user 65534; the fork's pid."""
    pid = os.fork()
    if pid == 0:
        try:
            signal.alarm(30)  # never left behind
            os.setuid(65534)
            act()  # leaves by os._exit itself
        finally:
            os._exit(1)
    return pid


def _connect(path: str) -> None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    os._exit(0 if conn.recv(1) == b"" else 1)  # the worker closed the connection, reading nothing


def _listen(path: str) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    listener.listen(1)
    os.rename(path + ".new", path)  # there once it listens
    listener.accept()[0].recv(1)
    os._exit(0)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs another user to connect as (root can be one)")
def test_each_end_serves_only_its_own_user(monkeypatch):
    folder = tempfile.mkdtemp(prefix="ff", dir="/tmp")  # pytest's tmp_path is not for other users
    os.chmod(folder, 0o777)
    path = os.path.join(folder, "w.sock")
    try:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        listener.settimeout(10)
        os.chmod(path, 0o777)
        stranger = _as_stranger(lambda: _connect(path))
        selector, read = selectors.DefaultSelector(), []
        monkeypatch.setattr(worker, "receive", read.append)
        worker._accept(listener, selector, -1)  # refused before reading: no fork, the connection closed
        assert os.waitstatus_to_exitcode(os.waitpid(stranger, 0)[1]) == 0 and not read and not selector.get_map()
        listener.close()
        os.unlink(path)
        theirs = _as_stranger(lambda: _listen(path))
        while not os.path.exists(path):
            time.sleep(0.02)
        assert "runs as user 65534" in resident.hand_over(["simulate", "x.mlir"], path)
        os.waitpid(theirs, 0)
    finally:
        shutil.rmtree(folder)
