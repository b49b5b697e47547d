"""The resident worker (an opt-in, `FUSEFLOW_WORKER=1`): a process that has imported the simulator
and loaded every kernel numba's cache holds, and runs the commands `cmdline.resident` hands it,
each in a fork of itself that becomes the process the command would have had.

    python -m fuseflow.worker SOCKET   # started by a first `fuseflow simulate`; leaves when idle

A command arrives as one message on the Unix socket, from a process of this user only
(SO_PEERCRED): its standard streams (passed as file descriptors) and the state of the process it
would have run in (`resident.process_state`). The fork closes what is the worker's (its socket,
lock, selector, the other commands' connections and pidfds), is killed if the worker dies, and
either takes that state on (`adopt`) and replies `pid N`, or replies `refused WHY` (`refusal`: the
client then runs the command itself). The worker passes on the signals the client sends (`signal
N`), kills the fork when the client's connection hangs up (the client died), and replies `exit N`
or `signal N` when the fork ends. One worker per socket (a lock file beside it, holding the
worker's pid); it binds the socket only once warm, and leaves after `resident.IDLE_SECONDS`
without a command or when its socket is gone.

    >>> ending(0), ending(2 << 8), ending(9)  # waitpid's statuses: exit 0, exit 2, killed by SIGKILL
    ('exit 0', 'exit 2', 'signal 9')
"""
from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import resource
import selectors
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field

from . import cli
from .cmdline import resident
from .sim.fast.dispatchers import kernel_dispatchers, load_cached

MAX_FDS = 253  # SCM_RIGHTS's most in one message
PR_SET_PDEATHSIG = 1
BASE_ENVIRONMENT = dict(os.environ)  # the worker's own: what numba and Python read when they started


@dataclass
class Request:
    """A command handed over: the state of the process it would have run in, its standard streams."""

    state: dict
    fds: list[int]


@dataclass
class Command:
    """A command running in a fork: its pid and pidfd, and the client's connection (None once the
    client hung up or was answered)."""

    pid: int
    pidfd: int | None
    conn: socket.socket | None
    heard: bytes = field(default=b"")


def ending(status: int) -> str:
    """The reply for a fork's wait status: `exit N`, or `signal N` for a fork a signal ended."""
    return f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.waitstatus_to_exitcode(status)}"


def warm() -> int:
    """Import what `simulate` imports and load every cached kernel signature; signatures loaded."""
    from .cmdline import simulate  # noqa: F401, PLC0415 - the command's imports, done once here

    return sum(load_cached(d) for d in kernel_dispatchers())


def receive(conn: socket.socket) -> Request:
    """Read one command from a client (its descriptors arrive as file descriptors: 0-2, then
    those it inherited)."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, MAX_FDS)
    try:
        size = int.from_bytes(data[:8], "big")
        body = bytearray(data[8:])
        while len(body) < size:
            chunk = conn.recv(size - len(body))
            if not chunk:
                raise OSError("a truncated request")
            body += chunk
        state = json.loads(body)
        if len(data) < 8 or len(fds) != len(state["fds"]) or state["fds"][:3] != [0, 1, 2]:
            raise OSError("a malformed request")
    except (OSError, ValueError, KeyError, TypeError):
        for fd in fds:
            os.close(fd)
        raise
    return Request(state, fds)


def _same(value):
    """`value` as it reads back from JSON (tuples as lists), to compare with a request's."""
    return json.loads(json.dumps(value))


def refusal(state: dict) -> str | None:
    """Why a fork of this worker cannot be the process the command would have had, in what no
    process can change about itself (None: it can be)."""
    mine = resident.identity()
    differ = [name for name, value in mine.items() if _same(value) != state["identity"].get(name)]
    if differ:
        return f"this process's {' and '.join(differ)} differ from the worker's"
    if _same([list(sys.flags), sys.warnoptions, sys._xoptions]) != state["flags"]:
        return "Python's options (-X, -W, -O, ...) differ from the worker's"
    env = state["env"]
    read = sorted(name for name in env.keys() | BASE_ENVIRONMENT.keys()
                  if name.startswith(resident.IMPORT_READ) and env.get(name) != BASE_ENVIRONMENT.get(name))
    if read:
        return f"{', '.join(read)} differ from the worker's (read when Python, numpy or numba start)"
    return None


def _take_on(state: dict) -> None:
    """Take on the client's priorities, limits and working directory; OSError naming one the fork
    may not take."""
    nice = state["nice"]
    if os.getpriority(os.PRIO_PROCESS, 0) != nice:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except OSError:
            raise OSError(f"nice {nice} is below the worker's {os.getpriority(os.PRIO_PROCESS, 0)}") from None
    for name, (soft, hard) in state["limits"].items():
        number = resident.rlimits()[name]
        if list(resource.getrlimit(number)) != [soft, hard]:
            try:
                resource.setrlimit(number, (soft, hard))
            except (OSError, ValueError):
                raise OSError(f"{name} {soft}:{hard} is above the worker's {resource.getrlimit(number)}") from None
    policy, priority = state["scheduler"]
    try:
        if [os.sched_getscheduler(0), os.sched_getparam(0).sched_priority] != state["scheduler"]:
            os.sched_setscheduler(0, policy, os.sched_param(priority))
        if sorted(os.sched_getaffinity(0)) != state["affinity"]:
            os.sched_setaffinity(0, state["affinity"])
        if state["ioprio"] is not None and resident.ioprio() != state["ioprio"]:
            resident.ioprio(state["ioprio"])
        if state["oom_score_adj"] not in (None, resident.proc_text("/proc/self/oom_score_adj")):
            with open("/proc/self/oom_score_adj", "w") as adj:
                adj.write(state["oom_score_adj"])
    except OSError as err:
        raise OSError(f"the scheduling policy, CPU affinity, I/O priority or OOM score: {err}") from None
    os.chdir(state["cwd"])


def _place(fds: list[int], numbers: list[int], conn: socket.socket) -> socket.socket:
    """The client's descriptors at the numbers they have there (0-2 its standard streams, the rest
    what it inherited), each inheritable as there; the connection moved above them."""
    high = max([*numbers, *fds, conn.fileno()]) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, high) for fd in fds]
    above = fcntl.fcntl(conn.fileno(), fcntl.F_DUPFD_CLOEXEC, high)
    os.close(conn.detach())
    conn = socket.socket(fileno=above)
    for fd in fds:
        os.close(fd)
    for fd, number in zip(moved, numbers):
        os.dup2(fd, number)
        os.close(fd)
    return conn


def _become(state: dict) -> None:
    """The client's environment, umask, sys.path and sys.argv, signal dispositions and mask."""
    os.environ.clear()
    os.environ.update(state["env"])
    time.tzset()  # TZ
    tempfile.tempdir = None  # TMPDIR
    os.umask(state["umask"])
    sys.path[:], sys.argv[:] = state["sys.path"], state["sys.argv"]
    ignored = set(state["ignored"])
    for sig in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}:
        handler = signal.SIG_IGN if sig in ignored else \
            signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL  # as Python starts
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, state["blocked"])


def _streams(streams: list) -> None:
    """sys.stdin, stdout and stderr over descriptors 0-2, made as Python makes them (the client's
    encoding, errors and buffering)."""
    made = []
    for fd, (encoding, errors, line_buffering, write_through) in enumerate(streams):
        raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
        buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        made.append(io.TextIOWrapper(buffered, encoding, errors, "\n", line_buffering, write_through))
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__ = made


def _leave_worker(inherited: list, parent: int) -> None:
    """In a fork: close what is the worker's (sockets, lock, selector, pidfds), and die with it."""
    import ctypes  # noqa: PLC0415 - prctl, in forks only

    for thing in inherited:
        with contextlib.suppress(OSError):
            if isinstance(thing, int):
                os.close(thing)
            else:  # a socket or the selector
                thing.close()
    if ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0 or os.getppid() != parent:
        os._exit(3)


def _run_forked(request: Request, conn: socket.socket, inherited: list, parent: int) -> None:
    """In the fork: become the client's process (its descriptors, limits, priorities, environment,
    signals, ...) and run the command, then leave with its status; or tell the client why not."""
    status = 3
    try:
        _leave_worker(inherited, parent)
        why = refusal(request.state)
        if why is None:
            conn = _place(request.fds, request.state["fds"], conn)
            try:
                _take_on(request.state)
                _become(request.state)
            except OSError as err:
                why = str(err)
        conn.sendall(f"refused {why}\n".encode() if why else f"pid {os.getpid()}\n".encode())
        conn.close()
        if why is None:
            _streams(request.state["streams"])
        status = 0 if why else cli.run(None)
    except SystemExit as done:
        status = done.code if isinstance(done.code, int) else 2
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(status)


def _accept(listener: socket.socket, selector: selectors.BaseSelector, lock: int) -> None:
    """Take a command from a client of this user, and start its fork."""
    conn, _ = listener.accept()
    try:
        if resident.peer(conn)[1] != os.getuid():
            raise OSError("a client of another user")
        conn.settimeout(10)
        request = receive(conn)
    except (OSError, ValueError, KeyError, TypeError):
        conn.close()
        return
    inherited = [lock, *(key.fileobj for key in selector.get_map().values()), selector]
    worker = os.getpid()
    pid = os.fork()
    if pid == 0:
        _run_forked(request, conn, inherited, worker)
    for fd in request.fds:
        os.close(fd)
    command = Command(pid, os.pidfd_open(pid), conn)
    conn.setblocking(False)
    selector.register(command.pidfd, selectors.EVENT_READ, command)
    selector.register(conn, selectors.EVENT_READ, command)


def _heard(command: Command, selector: selectors.BaseSelector) -> None:
    """The client sent signals to pass on, or hung up (it died): then the fork is killed."""
    try:
        data = command.conn.recv(4096)
    except BlockingIOError:
        return
    except OSError:
        data = b""
    lines = (command.heard + data).split(b"\n")
    command.heard = lines.pop()
    for word, _, number in (line.decode().partition(" ") for line in lines):
        if word == "signal" and number.isdigit():
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(command.pidfd, int(number))
    if not data:
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(command.pidfd, signal.SIGKILL)
        _hang_up(command, selector)


def _hang_up(command: Command, selector: selectors.BaseSelector) -> None:
    selector.unregister(command.conn)
    command.conn.close()
    command.conn = None


def _finished(command: Command, selector: selectors.BaseSelector) -> None:
    """The fork ended: reap it and tell the client how."""
    selector.unregister(command.pidfd)
    os.close(command.pidfd)
    command.pidfd = None
    _, status = os.waitpid(command.pid, 0)
    if command.conn is not None:
        with contextlib.suppress(OSError):
            command.conn.sendall(f"{ending(status)}\n".encode())
        _hang_up(command, selector)


def serve(listener: socket.socket, path: str, lock: int) -> None:
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
                _accept(listener, selector, lock)
            elif key.fileobj is key.data.conn:
                _heard(key.data, selector)
            elif key.fileobj == key.data.pidfd:  # (a key of a command already finished matches neither)
                _finished(key.data, selector)


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
        serve(listener, path, lock)
    finally:
        if os.path.exists(path) and os.stat(path).st_ino == ours:  # not a newer worker's
            os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
