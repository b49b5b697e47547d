"""The client side of the resident worker: `fuseflow simulate ...` handed to a warm process.

A `simulate` spends most of its start-up importing numpy, scipy and numba and loading the engine's
kernels from numba's cache (docs/performance.md). The first `simulate` runs in its own process as
always and then starts a worker (`python -m fuseflow.worker`) in the background that imports all
that and loads every cached kernel once; later commands hand the worker their arguments, working
directory, environment and standard streams over a Unix socket, and the worker runs each in a
fork of itself (a fresh process as far as the command can tell) and reports its exit status. The
worker leaves after `IDLE_SECONDS` without a command; a worker of another install or of an edited
source tree is not used (its socket is named by `install_key`). `FUSEFLOW_WORKER=0` (or `off`)
runs every command in its own process, as does a process under a memory limit (`ulimit -v`:
the worker would not inherit it).

    >>> wanted(["simulate", "m.mlir"], {}), wanted(["simulate", "m.mlir"], {"FUSEFLOW_WORKER": "0"})
    (True, False)
    >>> wanted(["inspect", "m.mlir"], {})
    False
"""
from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys

ENV = "FUSEFLOW_WORKER"
OFF = ("0", "off", "no", "false")
COMMANDS = frozenset({"simulate"})  # the commands that load the engine's kernels
IDLE_SECONDS = 900
START_SECONDS = 20  # the longest wait for the worker to start a command
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
MAX_SOCKET_PATH = 96  # a Unix socket's path is at most 107 bytes; the worker binds PATH.PID first
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wanted(argv: list[str], environ=os.environ) -> bool:
    """Whether this command line goes to the worker: a `COMMANDS` command, not opted out, no memory limit."""
    command = next((a for a in argv if not a.startswith("-")), None)
    if command not in COMMANDS or environ.get(ENV, "").strip().lower() in OFF:
        return False
    return resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY


def install_key() -> str:
    """A name for this install and the state of its source: the interpreter, the package's place
    and the newest modification time of its Python files (an edit starts a new worker)."""
    newest = 0
    for folder, _, files in os.walk(PACKAGE):
        newest = max([newest] + [os.stat(os.path.join(folder, f)).st_mtime_ns for f in files if f.endswith(".py")])
    return hashlib.sha256(f"{sys.executable}\0{PACKAGE}\0{newest}".encode()).hexdigest()[:16]


def socket_path(key: str | None = None) -> str | None:
    """Where the worker of this install listens, in a folder only this user can enter (None when
    that folder cannot be made or belongs to someone else: then there is no worker)."""
    folder = os.path.join(os.environ.get("XDG_RUNTIME_DIR") or "/tmp", f"fuseflow-worker-{os.getuid()}")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return None
    if info.st_uid != os.getuid() or info.st_mode & 0o077 or not os.path.isdir(folder):
        return None
    path = os.path.join(folder, f"{key or install_key()}.sock")
    return path if len(path) <= MAX_SOCKET_PATH else None


def hand_over(argv: list[str], path: str) -> int | None:
    """Run the command in the worker listening at `path`: its exit status, or None when no worker
    took it (none is running, or it refused before starting the command)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(START_SECONDS)  # a worker that does not answer is passed by
        conn.connect(path)
        payload = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        socket.send_fds(conn, [len(payload).to_bytes(8, "big") + payload], [0, 1, 2])
        replies = conn.makefile("rb")
        started = replies.readline()
        conn.settimeout(None)
    except OSError:
        conn.close()
        return None
    if not started.startswith(b"pid "):
        return None
    pid = int(started.split()[1])
    previous = {sig: signal.signal(sig, lambda number, _frame: os.kill(pid, number)) for sig in FORWARDED}
    try:
        finished = replies.readline()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not finished.startswith(b"status "):
        print("fuseflow: error: the resident worker stopped during the command (rerun with FUSEFLOW_WORKER=0 "
              "and please report it)", file=sys.stderr)
        return 3
    return int(finished.split()[1])


def start(path: str) -> None:
    """Start a worker for `path` in the background (it exits at once if one is starting already)."""
    subprocess.Popen([sys.executable, "-m", "fuseflow.worker", path], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                     env={**os.environ, ENV: "0"})
