"""A PyTorch module file whose import records the process it runs in (tests/test_worker_probes.py):
`fuseflow simulate tests/worker_probe.py:Net --input 4x4` writes, when it is imported, the
process's attributes as JSON to $PROBE_OUT (umask, nice, affinity, limits, environment, signal
dispositions, open descriptors, ...), then waits while the file $PROBE_HOLD exists (at most 20 s),
so that a test can signal the command while it runs."""
from __future__ import annotations

import json
import os
import resource
import signal
import sys
import tempfile
import time

import torch
from torch import nn


def _descriptor(fd: str) -> str:
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "gone"
    return "pipe" if target.startswith("pipe:") else target  # a pipe's inode differs per run


def _disposition(sig: signal.Signals) -> str:
    handler = signal.getsignal(sig)
    return {signal.SIG_IGN: "ignored", signal.SIG_DFL: "default", None: "unknown"}.get(handler, "handler")


def attributes() -> dict:
    """What a command could tell about the process it runs in."""
    mask = os.umask(0)
    os.umask(mask)
    written = os.path.join(os.path.dirname(os.environ["PROBE_OUT"]), f"written-{os.getpid()}")
    with open(written, "w") as f:
        f.write("x")
    mode = os.stat(written).st_mode & 0o777
    os.unlink(written)
    with open("/proc/self/cgroup") as f:
        cgroup = f.read()
    limits = {name: resource.getrlimit(getattr(resource, name)) for name in dir(resource)
              if name.startswith("RLIMIT_")}
    fds = {fd: _descriptor(fd) for fd in os.listdir("/proc/self/fd")}
    return {
        "pid": os.getpid(), "ppid": os.getppid(), "umask": mask, "written mode": mode, "cwd": os.getcwd(),
        "nice": os.getpriority(os.PRIO_PROCESS, 0), "affinity": sorted(os.sched_getaffinity(0)),
        "scheduler": os.sched_getscheduler(0), "limits": limits, "cgroup": cgroup,
        "environment": {k: v for k, v in os.environ.items() if k != "FUSEFLOW_WORKER"},
        "signals": {s.name: _disposition(s) for s in signal.Signals if s not in (signal.SIGKILL, signal.SIGSTOP)},
        "blocked": sorted(s.name for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "descriptors": {fd: what for fd, what in fds.items() if what != "gone"}, "tzname": list(time.tzname),
        "tempdir": tempfile.gettempdir(), "argv": sys.argv, "path": sys.path, "flags": list(sys.flags),
        "streams": [(s.encoding, s.errors, s.line_buffering) for s in (sys.stdin, sys.stdout, sys.stderr)],
        "gid": os.getgid(), "groups": sorted(os.getgroups()),
    }


if "PROBE_OUT" in os.environ:  # (not when pytest collects this file)
    with open(os.environ["PROBE_OUT"] + ".part", "w") as out:
        json.dump(attributes(), out)
    os.replace(os.environ["PROBE_OUT"] + ".part", os.environ["PROBE_OUT"])
    _deadline = time.monotonic() + 20
    while os.path.exists(os.environ.get("PROBE_HOLD", "/nonexistent")) and time.monotonic() < _deadline:
        time.sleep(0.02)


class Net(nn.Module):
    """relu(x): the smallest module there is to simulate."""

    def forward(self, x):
        return torch.relu(x)
