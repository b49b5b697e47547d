"""The resident worker: a process that has imported the simulator and loaded every kernel numba's
cache holds, and runs the commands `cmdline.resident` hands it, each in a fork of itself.

    python -m fuseflow.worker SOCKET   # started by the first `fuseflow simulate`; leaves when idle

A command arrives as one message on the Unix socket: its standard streams (passed as file
descriptors) and JSON with its arguments, working directory and environment. The fork takes
them over and runs `cli.run`; the worker replies `pid N` when the fork starts (the client
forwards Ctrl-C to it) and `status N` when it ends. One worker per socket (a lock file beside
it, holding the worker's pid); it binds the socket only once warm, and leaves after `resident.IDLE_SECONDS` without a
command or when its socket is gone.

    >>> exit_status(0), exit_status(-2)  # a fork killed by SIGINT: 128 + 2, as a shell says
    (0, 130)
"""
from __future__ import annotations

import fcntl
import io
import json
import os
import selectors
import signal
import socket
import sys
from dataclasses import dataclass

from . import cli
from .cmdline import resident
from .sim.fast.dispatchers import kernel_dispatchers, load_cached

MAX_FDS = 3


@dataclass
class Request:
    """A command handed over: its arguments, working directory, environment, standard streams."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    fds: list[int]


def exit_status(code: int) -> int:
    """A shell's exit status for `os.waitstatus_to_exitcode`'s value (a signal N: 128 + N)."""
    return 128 - code if code < 0 else code


def warm() -> int:
    """Import what `simulate` imports and load every cached kernel signature; signatures loaded."""
    from .cmdline import simulate  # noqa: F401, PLC0415 - the command's imports, done once here

    return sum(load_cached(d) for d in kernel_dispatchers())


def receive(conn: socket.socket) -> Request:
    """Read one command from a client (its streams arrive as file descriptors)."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, MAX_FDS)
    if len(data) < 8 or len(fds) != MAX_FDS:
        for fd in fds:
            os.close(fd)
        raise OSError("a malformed request")
    size = int.from_bytes(data[:8], "big")
    body = bytearray(data[8:])
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise OSError("a truncated request")
        body += chunk
    fields = json.loads(body)
    return Request(fields["argv"], fields["cwd"], fields["env"], fds)


def _adopt(request: Request) -> None:
    """Become the client's process: its streams, working directory, environment, default signals."""
    for target, fd in enumerate(request.fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout, sys.stderr = (io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), line_buffering=os.isatty(fd),
                                               write_through=fd == 2) for fd in (1, 2))
    sys.argv = ["fuseflow", *request.argv]


def _run_forked(request: Request, listener: socket.socket) -> None:
    """In the fork: run the command as the client's process would, then leave with its status."""
    status = 3
    try:
        listener.close()
        _adopt(request)
        status = cli.run(request.argv)
    except SystemExit as done:
        status = done.code if isinstance(done.code, int) else 2
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)


def _start(conn: socket.socket, listener: socket.socket) -> int | None:
    """Fork a process for the command `conn` brings; its pid (None for a request not understood)."""
    try:
        conn.settimeout(10)
        request = receive(conn)
    except (OSError, ValueError, KeyError):
        conn.close()
        return None
    pid = os.fork()
    if pid == 0:
        _run_forked(request, listener)
    for fd in request.fds:
        os.close(fd)
    conn.sendall(f"pid {pid}\n".encode())
    return pid


def serve(listener: socket.socket, path: str) -> None:
    """Accept commands until idle for `resident.IDLE_SECONDS` or the socket file is gone."""
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    while True:
        running = len(selector.get_map()) > 1
        events = selector.select(None if running else resident.IDLE_SECONDS)
        if not running and (not events or not os.path.exists(path)):
            break
        for key, _ in events:
            if key.fileobj is listener:
                conn, _ = listener.accept()
                pid = _start(conn, listener)
                if pid is not None:
                    selector.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, conn))
                continue
            pid, conn = key.data
            selector.unregister(key.fileobj)
            os.close(key.fileobj)
            status = exit_status(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
            try:
                conn.sendall(f"status {status}\n".encode())
            except OSError:  # the client left (killed); nothing to tell
                pass
            conn.close()


def main(argv: list[str] | None = None) -> int:
    path = (sys.argv[1:] if argv is None else argv)[0]
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)  # held for the worker's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # another worker for this socket is starting or running
        return 0
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())  # who serves (bench/startup.py reads its children's CPU time)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warm()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staging = f"{path}.{os.getpid()}"
    listener.bind(staging)
    listener.listen(16)
    os.replace(staging, path)
    ours = os.stat(path).st_ino
    try:
        serve(listener, path)
    finally:
        if os.path.exists(path) and os.stat(path).st_ino == ours:  # not a newer worker's
            os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
