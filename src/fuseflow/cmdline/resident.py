"""The client side of the resident worker, an opt-in (`FUSEFLOW_WORKER=1`): `fuseflow simulate ...`
handed to a warm process.

A `simulate` spends most of its start-up importing numpy, scipy and numba and loading the engine's
kernels from numba's cache (docs/performance.md). With `FUSEFLOW_WORKER=1` the first `simulate`
runs in its own process as always and then starts a worker (`python -m fuseflow.worker`) in the
background that imports all that and loads every cached kernel once; later commands hand it their
standard streams (as file descriptors) and the state of the process they would have run in
(`process_state`: arguments, working directory, environment, umask, nice, CPU affinity, every
rlimit, signal dispositions and mask, ...). The worker runs each command in a fork of itself that
takes that state on, or refuses when it cannot (`identity` differs: cgroup, namespaces,
credentials; a variable read at import differs, `IMPORT_READ`; a limit or priority the fork may
not raise), and the command then runs here; `--debug` says which. Signals sent to this process are
passed on to the fork (not those it ignores); the fork's end by a signal ends this process by the
same signal; the fork is killed when this process dies. The worker leaves after `IDLE_SECONDS`
without a command; a worker of another install, of an edited source tree or of other installed
packages is not used (its socket is named by `install_key`).

It is not the default, because some of what a process is cannot reach a fork of another: the
resources the fork uses (its CPU time and peak memory) are the worker's children's, not this
process's (`/usr/bin/time`, `wait4`, a shell's `time`), its memory is charged to the cgroup the
worker started in, and it is not in this process's process group or session (job control).

    >>> on = {"FUSEFLOW_WORKER": "1"}
    >>> wanted(["simulate", "m.mlir"], on), wanted(["simulate", "m.mlir"], {})
    (True, False)
    >>> wanted(["inspect", "m.mlir"], on), wanted(["simulate", "--help"], on), wanted(["--version", "simulate"], on)
    (False, False, False)
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import resource
import signal
import socket
import struct
import subprocess
import sys

from ..errors import FuseflowError
from .grammar import build_parser, command_named

ENV = "FUSEFLOW_WORKER"
ON = ("1", "on", "yes", "true")
COMMANDS = frozenset({"simulate"})  # the commands that load the engine's kernels
IDLE_SECONDS = 900
START_SECONDS = 20  # the longest wait for the worker to start a command
# signals from outside (a terminal, `kill`, `timeout`) passed on to the fork; SIGTSTP stops it
FORWARDED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGALRM, signal.SIGWINCH, signal.SIGCONT, signal.SIGTSTP)
# environment variables read when numpy, scipy, numba, llvmlite or Python itself start (the worker
# read its own): a command whose values differ runs in its own process
IMPORT_READ = ("NUMBA_", "NUMPY_", "NPY_", "SCIPY_", "PYTHON", "LLVM", "OMP_", "MKL_", "OPENBLAS_", "GOTO",
               "BLIS_", "KMP_", "TBB_", "TORCH", "CUDA", "LD_", "MALLOC_", "GLIBC_", "LC_", "LANG")
STATUS_LINES = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")
IOPRIO_CALLS = {"x86_64": (251, 252), "aarch64": (30, 31)}  # ioprio_set, ioprio_get
MAX_DESCRIPTORS = 253  # the most one message passes (SCM_RIGHTS)
MAX_SOCKET_PATH = 96  # a Unix socket's path is at most 107 bytes; the worker binds PATH.PID first
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NO_WORKER = "no resident worker runs for this install (one starts after this command)"


def enabled(environ=os.environ) -> bool:
    """Whether commands go to the resident worker at all (`FUSEFLOW_WORKER=1`)."""
    return environ.get(ENV, "").strip().lower() in ON


def wanted(argv: list[str], environ=os.environ) -> bool:
    """Whether this command line goes to the worker: it is `enabled`, and `argv` is a `COMMANDS`
    command that parses (not --help, --version or a usage error, which start nothing)."""
    return enabled(environ) and parsed(argv) is not None


def parsed(argv: list[str]):
    """`argv` parsed as the command will parse it, silently, when it names a `COMMANDS` command;
    None otherwise (and for --help, --version or a usage error, which print when the command runs)."""
    if command_named(argv) not in COMMANDS:
        return None
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return build_parser(command_named(argv)).parse_args(argv)
    except (SystemExit, FuseflowError):  # the command, run here, says what is wrong
        return None


def dispatch(argv: list[str], run) -> int:
    """Run the command line `argv` in the resident worker when `wanted`, else by `run(None)` in this
    process (with --debug, saying why); a first command starts a worker for the next."""
    args = parsed(argv)
    if args is None:
        return run(None)
    why, path = at_home(), None
    if why is None:
        path = socket_path()
        why = "no folder of this user's for the worker's socket" if path is None else None
    if why is None:
        outcome = hand_over(argv, path, args.debug)
        if isinstance(outcome, int):
            return outcome
        why = outcome
    if args.debug:
        print(f"fuseflow: running in this process, not in the resident worker: {why}", file=sys.stderr)
    status = run(None)
    if why == NO_WORKER:
        start(path)
    return status


def at_home() -> str | None:
    """Why this process cannot hand its command over, from what it knows alone (None: it can)."""
    if any(resource.getrlimit(r)[0] != resource.RLIM_INFINITY for r in (resource.RLIMIT_AS, resource.RLIMIT_DATA)):
        return "a memory limit (ulimit -v or -d) would count the worker's memory too"
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            if os.tcgetpgrp(fd) != os.getpgrp():
                return "a background job of a terminal (job control reaches only the terminal's own processes)"
            break
    return None


def install_key(package: str = PACKAGE, site: list[str] | None = None) -> str:
    """A name for this install and the state of its code: the interpreter, the set of the package's
    files with the content of its Python files (the size, modification and change times of the
    others), and the packages installed beside it (their dist-info names carry their versions)."""
    digest = hashlib.sha256(f"{sys.executable}\0{sys.version}\0{package}\n".encode())
    real = os.stat(os.path.realpath(sys.executable))
    digest.update(f"{real.st_size} {real.st_mtime_ns} {real.st_ino}\n".encode())
    for folder, subfolders, files in os.walk(package):
        subfolders[:] = sorted(f for f in subfolders if f != "__pycache__")
        for name in sorted(files):
            path = os.path.join(folder, name)
            digest.update(f"{os.path.relpath(path, package)}\0".encode())
            if name.endswith(".py"):
                with open(path, "rb") as source:
                    text = source.read()
                digest.update(f"{len(text)}\0".encode() + text)
            else:
                info = os.stat(path)
                digest.update(f"{info.st_size} {info.st_mtime_ns} {info.st_ctime_ns}\n".encode())
    for folder in sorted({p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")}
                         if site is None else site):
        with contextlib.suppress(OSError):
            digest.update("\0".join(sorted(n for n in os.listdir(folder) if n.endswith(("-info", ".pth")))).encode())
    return digest.hexdigest()[:16]


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


def peer(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket (SO_PEERCRED)."""
    return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))


def proc_text(path: str) -> str | None:
    """A file of /proc (None where it cannot be read)."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def identity() -> dict:
    """What a process cannot change about itself unprivileged, so that a fork of the worker can
    take a command only where the worker has the same: cgroup, namespaces, credentials and
    capabilities, personality, security label."""
    status = [line for line in (proc_text("/proc/self/status") or "").splitlines()
              if line.split(":")[0] in STATUS_LINES]
    try:
        spaces = {name: os.stat(f"/proc/self/ns/{name}").st_ino for name in sorted(os.listdir("/proc/self/ns"))}
    except OSError:
        spaces = None
    return {"cgroup": proc_text("/proc/self/cgroup"), "namespaces": spaces, "status": status,
            "personality": proc_text("/proc/self/personality"), "label": proc_text("/proc/self/attr/current")}


def ioprio(value: int | None = None) -> int | None:
    """This process's I/O priority (`ionice`), or set it to `value`; None where not known."""
    calls = IOPRIO_CALLS.get(os.uname().machine)
    if calls is None:
        return None
    import ctypes  # noqa: PLC0415 - only a command handed over needs it

    libc = ctypes.CDLL(None, use_errno=True)
    if value is None:
        return libc.syscall(calls[1], 1, 0)  # IOPRIO_WHO_PROCESS, this process
    if libc.syscall(calls[0], 1, 0, value) != 0:
        raise OSError(ctypes.get_errno(), f"ionice {value}")
    return value


def rlimits() -> dict[str, int]:
    return {name: getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_")}


def process_state(argv: list[str]) -> dict:
    """What the command would have had as a process of its own (the fork takes it on)."""
    umask = os.umask(0o077)
    os.umask(umask)
    return {
        "argv": argv, "sys.argv": sys.argv, "sys.path": sys.path, "cwd": os.getcwd(), "env": dict(os.environ),
        "flags": [list(sys.flags), sys.warnoptions, sys._xoptions], "umask": umask,
        "nice": os.getpriority(os.PRIO_PROCESS, 0), "affinity": sorted(os.sched_getaffinity(0)),
        "scheduler": [os.sched_getscheduler(0), os.sched_getparam(0).sched_priority], "ioprio": ioprio(),
        "oom_score_adj": proc_text("/proc/self/oom_score_adj"),
        "limits": {name: resource.getrlimit(number) for name, number in rlimits().items()},
        "ignored": [int(s) for s in signal.valid_signals() if signal.getsignal(s) is signal.SIG_IGN],
        "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "streams": [(s.encoding, s.errors, s.line_buffering, s.write_through)
                    for s in (sys.stdin, sys.stdout, sys.stderr)],
        "identity": identity(), "fds": descriptors(),
    }


def descriptors() -> list[int]:
    """This process's standard streams and the descriptors it inherited (those Python opens are not
    inheritable), as the fork is to have them."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if int(name) <= 2 or os.get_inheritable(int(name)):
                found.append(int(name))
    if sorted(found)[:3] != [0, 1, 2] or len(found) > MAX_DESCRIPTORS:
        raise OSError(f"descriptors {sorted(found)[:8]}: not 0-2 open, or more than {MAX_DESCRIPTORS}")
    return sorted(found)


def hand_over(argv: list[str], path: str, debug: bool = False) -> int | str:
    """Run the command in the worker listening at `path`: its exit status, or why it runs here
    instead (no worker, or the worker refused it before it started)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(START_SECONDS)  # a worker that does not answer is passed by
        conn.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        conn.close()
        return NO_WORKER
    except OSError as err:
        conn.close()
        return f"the worker's socket: {err}"
    try:
        worker, uid, _ = peer(conn)
        if uid != os.getuid():
            raise OSError(f"the worker runs as user {uid}")
        state = process_state(argv)
        payload = json.dumps(state).encode()
        socket.send_fds(conn, [len(payload).to_bytes(8, "big") + payload], state["fds"])
        replies = conn.makefile("rb")
        word, _, rest = replies.readline().decode().strip().partition(" ")
        conn.settimeout(None)
    except (OSError, AttributeError, ValueError) as err:  # AttributeError: a standard stream is closed
        conn.close()
        return f"the worker did not take the command ({err})"
    if word != "pid":
        conn.close()
        return rest if word == "refused" else "the worker did not start the command"
    if debug:
        print(f"fuseflow: handed to the resident worker (pid {worker}); the command runs in its fork, pid {rest}",
              file=sys.stderr)
    with contextlib.closing(conn):
        return _await(conn, replies)


def _await(conn: socket.socket, replies) -> int:
    """Pass signals on to the fork until it ends; its exit status (a fork ended by a signal ends
    this process by the same signal)."""
    def forward(number, _frame):
        with contextlib.suppress(OSError):  # the worker is gone: the reply below says so
            conn.sendall(f"signal {number}\n".encode())

    def stop(_number, _frame):  # Ctrl-Z: the fork stops, then this process, until continued
        forward(signal.SIGSTOP, None)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)
        signal.signal(signal.SIGTSTP, stop)
        forward(signal.SIGCONT, None)

    previous = {sig: signal.signal(sig, stop if sig == signal.SIGTSTP else forward) for sig in FORWARDED
                if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        word, _, number = replies.readline().decode().strip().partition(" ")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if word == "signal":
        return die_by(int(number))
    if word != "exit":
        print("fuseflow: error: the resident worker stopped during the command (rerun without FUSEFLOW_WORKER=1 "
              "and please report it)", file=sys.stderr)
        return 3
    return int(number)


def die_by(number: int) -> int:
    """End this process by signal `number`, as the fork ended (no second core dump); 128 + number
    where that signal does not end a process."""
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [number])
    os.kill(os.getpid(), number)
    return 128 + number


def start(path: str) -> None:
    """Start a worker for `path` in the background (it exits at once if one is starting already)."""
    subprocess.Popen([sys.executable, "-m", "fuseflow.worker", path], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                     cwd=os.path.dirname(PACKAGE),
                     env={**os.environ, ENV: "0"})
