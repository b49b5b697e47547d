"""A benchmark's child process run in two source trees in turn: the working tree and a named
commit checked out into a git worktree, both with the same Python (the one running this).

Each tree runs on its own sources (`PYTHONPATH=TREE/src`, numba's cache beside them), one process
at a time, A B A B ..., so that a drift of the machine's speed falls on both alike; a process's
wall time and peak resident memory come from `/usr/bin/time -f '%e %M'` where it exists (else
from `resource.getrusage` of the children).

    >>> spread([1.0, 3.0, 2.0])
    Spread(median=2.0, low=1.0, high=3.0)
    >>> str(Spread(0.915, 0.9, 0.94))
    '0.92 (0.90-0.94)'
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIME = "/usr/bin/time"


@dataclass(frozen=True)
class Tree:
    """A source tree: `label` to print, `path` its root (src/ holds the package)."""

    label: str
    path: str

    @property
    def src(self) -> str:
        return os.path.join(self.path, "src")


@dataclass
class ProcessRun:
    """One child process: what it printed last as JSON (`out`, None if it failed), its wall
    seconds and peak resident memory (MB), and the end of its stderr when it failed."""

    tree: Tree
    out: dict | None
    seconds: float
    peak_mb: float
    error: str = ""


@dataclass(frozen=True)
class Spread:
    """The median of some measurements and their range."""

    median: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.median:.2f} ({self.low:.2f}-{self.high:.2f})"


def spread(values: list[float]) -> Spread:
    return Spread(statistics.median(values), min(values), max(values))


def bad_baseline(message: str) -> SystemExit:
    """Exit status 2 after a one-line message on stderr: the baseline cannot be checked out."""
    print(message, file=sys.stderr)
    return SystemExit(2)


def _git(*args: str, cwd: str = ROOT) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise bad_baseline(f"git {' '.join(args)}: {done.stderr.strip().splitlines()[-1] if done.stderr else 'failed'}")
    return done.stdout.strip()


def checkout(commit: str) -> Tree:
    """`commit` in a worktree of its own under the temporary directory (fuseflow-at-SHA), made with
    `git worktree add --detach`, or the one made by an earlier run (its numba cache then warm)."""
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode:
        raise bad_baseline(f"{commit}: not a commit of the repository at {ROOT}")
    sha = done.stdout.strip()
    path = os.path.join(tempfile.gettempdir(), f"fuseflow-at-{sha[:12]}")
    if os.path.isdir(path):
        if _git("rev-parse", "HEAD", cwd=path) != sha:
            raise bad_baseline(f"{path} exists and is not a checkout of {sha[:12]}: remove it first")
    else:
        _git("worktree", "add", "--detach", path, sha)
    if not os.path.isdir(os.path.join(path, "src", "fuseflow")):
        raise bad_baseline(f"{commit} ({sha[:12]}) has no src/fuseflow: not a baseline this benchmark can run")
    return Tree(f"{commit} ({sha[:12]})" if not sha.startswith(commit) else sha[:12], path)


def remove(tree: Tree) -> None:
    """Remove a worktree made by `checkout`."""
    _git("worktree", "remove", "--force", tree.path)


def run_in(tree: Tree, argv: list[str], timeout: float | None = None) -> ProcessRun:
    """Run `python argv...` on `tree`'s sources; the last stdout line that parses as JSON is `out`."""
    env = dict(os.environ, PYTHONPATH=tree.src, FUSEFLOW_WORKER="0")
    cmd = [sys.executable, *argv]
    with tempfile.NamedTemporaryFile("r", suffix=".time") as stamp:
        timed = [TIME, "-f", "%e %M", "-o", stamp.name, *cmd] if os.access(TIME, os.X_OK) else cmd
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.perf_counter()
        try:
            done = subprocess.run(timed, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return ProcessRun(tree, None, time.perf_counter() - start, 0.0, f"timed out after {timeout:.0f} s")
        seconds = time.perf_counter() - start
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        peak_kb = peak_kb if peak_kb > before else 0
        words = stamp.read().split() if timed is not cmd else []
    if len(words) >= 2 and words[-1].isdigit():
        seconds, peak_kb = float(words[-2]), int(words[-1])
    out = None
    for line in reversed(done.stdout.strip().splitlines()):
        try:
            out = json.loads(line)
            break
        except ValueError:
            continue
    error = "" if done.returncode == 0 and out is not None else _last_error(done.stderr, done.returncode)
    return ProcessRun(tree, out if not error else None, seconds, peak_kb / 1024, error)


def _last_error(stderr: str, code: int) -> str:
    """The last line of a failed child's stderr that says something (an exception's message)."""
    lines = [x.strip() for x in stderr.strip().splitlines() if x.strip() and not x.startswith("Command exited")]
    return lines[-1] if lines else f"exit status {code}, nothing on stderr"


@dataclass
class Alternation:
    """`pairs` rounds of one process per tree, in the trees' order, after one uncounted warm-up
    process per tree (numba's cache filled for both); `runs[label]` the counted ones."""

    trees: list[Tree]
    runs: dict[str, list[ProcessRun]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # a tree's label -> why it could not run

    def run(self, argv_of: Callable[[Tree], list[str]], pairs: int, timeout: float | None = None,
            progress: Callable[[str], None] | None = None) -> Alternation:
        """Run `python argv_of(tree)` as above; a tree whose warm-up fails is noted in `failed`
        and no pairs run."""
        for tree in self.trees:
            warm = run_in(tree, argv_of(tree), timeout)
            if warm.error:
                self.failed[tree.label] = warm.error
        live = [t for t in self.trees if t.label not in self.failed]
        for i in range(pairs if len(live) == len(self.trees) else 0):
            for tree in live:
                done = run_in(tree, argv_of(tree), timeout)
                if done.error:
                    self.failed[tree.label] = f"round {i + 1}: {done.error}"
                    return self
                self.runs.setdefault(tree.label, []).append(done)
                if progress is not None:
                    progress(f"{tree.label} {i + 1}/{pairs}")
        return self


def kept_note(tree: Tree) -> str:
    """How to remove a kept baseline worktree."""
    return (f"baseline worktree kept at {tree.path} (numba cache warm); "
            f"remove with: git worktree remove --force {tree.path}")


__all__ = ["Alternation", "ProcessRun", "Spread", "Tree", "bad_baseline", "checkout", "kept_note", "remove",
           "run_in", "spread"]
