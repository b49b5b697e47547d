"""Jobs run in a child process under a watchdog: the child appends a ``start`` record before each job and
a ``done`` record after it; a job past its time limit, or a child that dies (a CUDA fault), costs that job
only: the child's process group is killed, the job is recorded as failed with its launch parameters, and
a fresh child goes on from the next job.

The child is ``python -m fuseflow.gpu.measuring.kernel_child JOBS RESULTS FIRST``; the environment variable
``FUSEFLOW_GPU_CHILD`` replaces its command (tests run a stand-in child with it, no GPU needed).

    >>> child_command()[-1]
    'fuseflow.gpu.measuring.kernel_child'
"""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from .kernel_jobs import KernelJob, write_jobs
from .result_log import Record, append, read_from

CHILD_HOOK = "FUSEFLOW_GPU_CHILD"
STARTUP_S = 90.0          # a child's imports and CUDA start before its first job
HANGS_BEFORE_STOP = 3     # jobs in a row that time out before the rest are not started
POLL_S = 0.1


def child_command() -> list[str]:
    """The child's command line without its arguments."""
    hook = os.environ.get(CHILD_HOOK)
    return shlex.split(hook) if hook else [sys.executable, "-m", "fuseflow.gpu.measuring.kernel_child"]


@dataclass(frozen=True)
class Supervised:
    records: list           # the done records of the jobs, in job order (one per job)
    children: int           # child processes started


def _failure(job: KernelJob, status: str, reason: str, seconds: float = 0.0) -> Record:
    return Record("done", job.key, job.stage, job.chain, job.rank, job.path, status, reason, seconds, job.launch)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _tail(path) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [ln.strip() for ln in f.read()[-4000:].splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


class _Child:
    """One child's run over ``jobs[first:]``: its records taken as they arrive, failures recorded."""

    def __init__(self, jobs, index, done, results, first, log, progress):
        self.jobs, self.index, self.done, self.results = jobs, index, done, results
        self.first, self.log, self.progress = first, log, progress
        self.current, self.started_at, self.moved = None, None, False
        self.spawned = time.monotonic()
        self.offset = os.path.getsize(results) if os.path.exists(results) else 0

    def take(self) -> int:
        """Read the new records; returns how many jobs finished."""
        new, self.offset = read_from(self.results, self.offset)
        finished = 0
        for r in new:
            i = self.index.get(r.key)
            if i is None or i < self.first:
                continue
            if r.event == "start":
                self.current, self.started_at = i, time.monotonic()
            elif r.event == "done":
                self.done[i], self.moved = r, True
                finished += 1
                self.progress(f"{r.key}: {r.status}{' - ' + r.reason if r.reason else ''}")
                if self.current == i:
                    self.current = None
        return finished

    def fail(self, i: int, status: str, why: str) -> None:
        self.done[i] = _failure(self.jobs[i], status, why, time.monotonic() - (self.started_at or self.spawned))
        append(self.results, self.done[i])
        self.progress(f"{self.jobs[i].key}: {status} - {why}")

    def watch(self, proc: subprocess.Popen, deadline: float) -> bool:
        """Poll until the child ends or is killed; True when its current job timed out."""
        while True:
            self.take()
            rc, now = proc.poll(), time.monotonic()
            if rc is not None:
                self.take()                                  # what the child wrote as it exited
                said = _tail(self.log) or "no message"
                if self.current is not None:
                    self.fail(self.current, "fault", f"the child exited {rc} while running it: {said}")
                elif not self.moved:
                    self.fail(self.first, "error", f"the child exited {rc} before finishing a job: {said}")
                return False
            job = self.jobs[self.current] if self.current is not None else None
            if job is not None and now - self.started_at > job.timeout_s:
                _kill(proc)
                self.fail(self.current, "timeout", f"timed out after {job.timeout_s:.0f} s (a kernel hang?); "
                                                   "its child was killed")
                return True
            if job is None and not self.moved and now - self.spawned > STARTUP_S:
                _kill(proc)
                self.fail(self.first, "error", f"the child did not start a job within {STARTUP_S:.0f} s")
                return False
            if now >= deadline:
                _kill(proc)
                if job is not None:
                    self.fail(self.current, "timeout", "stopped at the stage's time limit while it ran")
                return False
            time.sleep(POLL_S)


def run_jobs(jobs: list[KernelJob], results: str, work_dir: str, deadline: float,
             progress=lambda line: None) -> Supervised:
    """Run ``jobs`` in children until done or ``deadline`` (time.monotonic()); every job ends with one
    done record in ``results`` (jobs not started are recorded as skipped, with the reason)."""
    jobs_file = os.path.join(work_dir, f"jobs_{os.getpid()}_{time.monotonic_ns()}.json")
    write_jobs(jobs_file, jobs)
    index = {j.key: i for i, j in enumerate(jobs)}
    done: dict[int, Record] = {}
    first, children, hangs = 0, 0, 0
    while first < len(jobs):
        if hangs >= HANGS_BEFORE_STOP or time.monotonic() >= deadline:
            why = (f"not run: {hangs} kernels in a row timed out" if hangs >= HANGS_BEFORE_STOP
                   else "not run: the stage's time budget was spent")
            for i in range(first, len(jobs)):
                done[i] = _failure(jobs[i], "skipped", why)
                append(results, done[i])
            break
        log = os.path.join(work_dir, f"child_{children}.log")
        child = _Child(jobs, index, done, results, first, log, progress)
        with open(log, "w") as err:
            proc = subprocess.Popen([*child_command(), jobs_file, results, str(first)], stdout=err, stderr=err,
                                    start_new_session=True)
        children += 1
        try:
            timed_out = child.watch(proc, deadline)
        finally:                     # the parent stopped (SIGTERM, an error): no child is left behind
            if proc.poll() is None:
                _kill(proc)
        if timed_out:
            hangs = 1 if child.moved else hangs + 1       # timeouts in a row, with no result between
        elif child.moved:
            hangs = 0
        finished = [i for i in done if i >= first]
        first = max(finished) + 1 if finished else first
    os.remove(jobs_file)
    return Supervised([done[i] for i in sorted(done)], children)
