"""Progress on stderr, drawn with tqdm on a terminal only (nothing in logs and pipes).

`TaskProgress` counts finished tasks of a sweep. `RunProgress` follows one simulation and is
live from its first moment: a ticker redraws the elapsed time every half second, so a long
first kernel never looks like a hang. It takes two callbacks: `on_kernel(done, total)` after
each kernel (what `simulate` reports today) and `on_events(done_events, estimated_events)` for
token events inside the running kernel (the engine reports them as it goes). With the
heuristic's per-kernel estimates the bar counts token events, so kernels weigh what they cost.
`numba_notice` prints one line when numba starts compiling the simulator's kernels (a
signature not in numba's on-disk cache yet; `fuseflow.warmup`, run at setup, fills it).

    >>> import io
    >>> class Terminal(io.StringIO):
    ...     def isatty(self):
    ...         return True
    >>> out = Terminal()
    >>> run = RunProgress("gcn full", estimated_events=[300.0, 100.0], out=out)
    >>> run.on_kernel(1, 2)
    >>> run.bar.n, run.bar.total
    (300.0, 400.0)
    >>> run.close()
    >>> "gcn full" in out.getvalue()
    True
    >>> RunProgress("quiet", out=io.StringIO()).bar is None  # not a terminal: nothing drawn
    True
"""
from __future__ import annotations

import sys
import threading

from tqdm import tqdm

TICK_SECONDS = 0.5
BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar:24}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"
EVENTS_FORMAT = "{desc}: {percentage:3.0f}%|{bar:24}| {n:.3g}/{total:.3g} token events [{elapsed}<{remaining}{postfix}]"
OPEN_FORMAT = "{desc}: [{elapsed}{postfix}]"
PAST_FORMAT = "{desc}: {n:.3g} token events, past the estimate [{elapsed}{postfix}]"


def is_terminal(out) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


class _Ticker:
    """Redraws a bar (or calls `redraw`) every `TICK_SECONDS` from a daemon thread until stopped."""

    def __init__(self, bar: tqdm | None = None, redraw=None):
        self.redraw, self.stop = redraw or bar.refresh, threading.Event()
        self.thread = threading.Thread(target=self._run, name="fuseflow-progress", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(TICK_SECONDS):
            self.redraw()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


class TaskProgress:
    """Tasks finished of `total` (a sweep), with failures counted in the postfix."""

    def __init__(self, total: int, label: str = "sweep", out=None, enabled: bool | None = None):
        out = out if out is not None else sys.stderr
        self.errors = 0
        self.bar = tqdm(total=total, desc=label, file=out, bar_format=BAR_FORMAT, dynamic_ncols=True,
                        disable=not (is_terminal(out) if enabled is None else enabled))
        self.ticker = _Ticker(self.bar) if not self.bar.disable else None

    def update(self, n: int = 1, note: str = "", error: bool = False) -> None:
        self.errors += int(error)
        postfix = ", ".join(p for p in (f"{self.errors} failed" if self.errors else "", note[:40]) if p)
        self.bar.set_postfix_str(postfix, refresh=False)
        self.bar.update(n)

    def close(self) -> None:
        if self.ticker:
            self.ticker.close()
            self.ticker = None
        self.bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RunProgress:
    """One simulation, live from the start. Without estimates the bar counts kernels once the
    first one reports; before that it shows the elapsed time."""

    def __init__(self, label: str, estimated_events: list[float] | None = None, out=None,
                 enabled: bool | None = None):
        out = out if out is not None else sys.stderr
        self.estimates = [max(0.0, float(e)) for e in estimated_events] if estimated_events else None
        self.kernels_done = 0
        self.bar = None
        if not (is_terminal(out) if enabled is None else enabled):
            return
        total = sum(self.estimates) if self.estimates and sum(self.estimates) > 0 else None
        self.bar = tqdm(total=total, desc=label, file=out, dynamic_ncols=True,
                        bar_format=EVENTS_FORMAT if total else OPEN_FORMAT)
        self.ticker = _Ticker(self.bar)

    def on_kernel(self, done: int, total: int) -> None:
        """After each kernel: `done` of `total` kernels finished."""
        self.kernels_done = done
        if self.bar is None:
            return
        if self.bar.total and self.estimates and len(self.estimates) == total:
            self.bar.n = min(self.bar.total, sum(self.estimates[:done]))
        else:
            self.bar.bar_format, self.bar.total, self.bar.n = BAR_FORMAT, total, done
        self.bar.set_postfix_str(f"kernel {done}/{total}", refresh=False)
        self.bar.refresh()

    def on_events(self, done_events: float, estimated_events: float | None = None) -> None:
        """Inside the running kernel: the token events it has simulated so far (the engine calls
        this about twice a second), of `estimated_events` for that kernel if given, else of the
        heuristic's estimate; the total grows when the count passes it."""
        if self.bar is None:
            return
        before = sum(self.estimates[:self.kernels_done]) if self.estimates else 0.0
        share = estimated_events
        if share is None and self.estimates and self.kernels_done < len(self.estimates):
            share = self.estimates[self.kernels_done]
        rest = sum(self.estimates[self.kernels_done + 1:]) if self.estimates else 0.0
        self.bar.bar_format = EVENTS_FORMAT
        self.bar.n = before + float(done_events)
        self.bar.total = max(before + max(float(share or 0.0), float(done_events)) + rest, 1.0)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.ticker.close()
            self.bar.close()
            self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_NOTICE_GIVEN = threading.Event()  # the numba notice is printed once per process


NUMBA_NOTICE = ("fuseflow: compiling the simulator's kernels with numba (a kind not in its cache yet: once; "
                "`python -m fuseflow.warmup` compiles the common ones ahead)")


def numba_notice(out=None):
    """A context in which numba's first compilation prints a one-line notice on `out` (stderr),
    once per process."""
    from numba.core import event  # noqa: PLC0415 - numba is slow to import; only a simulation needs it

    class CompileNotice(event.Listener):
        def on_start(self, ev) -> None:
            if not _NOTICE_GIVEN.is_set():
                _NOTICE_GIVEN.set()
                tqdm.write(NUMBA_NOTICE, file=out if out is not None else sys.stderr)

        def on_end(self, ev) -> None:
            pass

    return event.install_listener("numba:compile", CompileNotice())


class SuiteProgress:
    """A suite's progress on `out` (stderr): on a terminal, a bar of tasks done (with the tasks
    running, estimated and failed, and tqdm's ETA) and one bar per running task below it (its
    elapsed time until the task has an estimate, then its token events of the heuristic's
    estimate, or their count once past it), all redrawn every `TICK_SECONDS`; elsewhere one
    line per finished task. `event`
    takes a task's progress messages ({"task", "done", "total"}; total None before an
    estimate), `finished` its database row (a `studies.row.ResultRow`).

        >>> import io
        >>> from fuseflow.studies.row import ResultRow
        >>> out = io.StringIO()
        >>> with SuiteProgress("demo", total=2, out=out) as p:
        ...     p.start(workers=2)
        ...     p.event({"task": "gcn karate unfused", "done": 5.0, "total": 10.0})
        ...     p.finished("gcn karate unfused", ResultRow("unfused", cycles=1200, wall_seconds=1.5))
        >>> print(out.getvalue().strip())
        suite demo: 2 tasks to run (0 done before) on 2 workers
        [1/2] gcn karate unfused: ok, 1,200 cycles, 1.5 s
    """

    def __init__(self, name: str, total: int, done_before: int = 0, out=None, enabled: bool = True):
        self.name, self.total, self.before = name, total, done_before
        self.out = out if out is not None else sys.stderr
        self.enabled, self.done = enabled, 0
        self.counts = {"estimated": 0, "error": 0}
        self.running: dict[str, tqdm] = {}
        self.ended: set[str] = set()  # tasks whose bars are gone
        self.lock = threading.Lock()
        self.bar = None
        if enabled and is_terminal(self.out):
            # smoothing 0: the ETA is the mean time per task so far, so it grows while tasks run long
            self.bar = tqdm(total=total, desc=f"suite {name}", file=self.out, bar_format=BAR_FORMAT,
                            dynamic_ncols=True, smoothing=0)
            self.ticker = _Ticker(redraw=self._redraw)

    def _redraw(self) -> None:
        with self.lock:
            if self.bar is not None:
                for bar in (self.bar, *self.running.values()):
                    bar.refresh()

    def start(self, workers: int) -> None:
        if self.enabled:
            self._write(f"suite {self.name}: {self.total} tasks to run ({self.before} done before) on "
                        f"{workers} worker{'s' if workers != 1 else ''}")

    def _write(self, text: str) -> None:
        if self.bar is not None:
            tqdm.write(text, file=self.out)
        else:
            print(text, file=self.out, flush=True)

    def _postfix(self) -> None:
        parts = [f"{len(self.running)} running"] + [f"{n} {k.replace('error', 'failed')}"
                                                    for k, n in self.counts.items() if n]
        self.bar.set_postfix_str(", ".join(parts), refresh=False)

    def event(self, message: dict) -> None:
        """A running task's progress (called from dask's event thread or the running task); its
        last message (`"end": True`, sent when its worker is done with it) takes its bar away."""
        if self.bar is None:
            return
        with self.lock:
            task = message["task"]
            if message.get("end") or task in self.ended:  # a late message of an ended task is dropped
                self._end(task)
                return
            bar = self.running.get(task)
            if bar is None:  # on the first line below the others
                bar = tqdm(total=None, desc=f"  {task}", file=self.out, bar_format=OPEN_FORMAT,
                           position=len(self.running) + 1, leave=False, dynamic_ncols=True)
                self.running[task] = bar
            done, total = float(message.get("done") or 0.0), message.get("total")
            if total and done <= float(total):
                bar.bar_format, bar.total, bar.n = EVENTS_FORMAT, max(float(total), 1.0), done
            elif total:  # the heuristic estimated fewer: a count, without a percentage or an ETA
                bar.bar_format, bar.total, bar.n = PAST_FORMAT, None, done
            if message.get("note"):
                bar.set_postfix_str(message["note"], refresh=False)
            bar.refresh()
            self._postfix()
            self.bar.refresh()

    def _end(self, task: str) -> None:
        """Take the task's bar away and move the bars below it up a line (lock held)."""
        self.ended.add(task)
        bar = self.running.pop(task, None)
        if bar is None:
            return
        bar.close()
        for line, other in enumerate(sorted(self.running.values(), key=lambda b: abs(b.pos)), 1):
            if abs(other.pos) != line:
                other.clear()
                other.pos = -line  # tqdm's mark of a fixed position
                other.refresh()
        self._postfix()
        self.bar.refresh()

    def finished(self, task: str, row) -> None:
        """A task's `ResultRow` arrived: counted by status and written as a line."""
        with self.lock:
            self.done += 1
            status = row.status
            if status in self.counts:
                self.counts[status] += 1
            if self.bar is not None:
                self._end(task)
            what = {"ok": f"ok, {row.cycles or 0:,} cycles",
                    "estimated": f"estimated ({row.reason})"}.get(status, f"failed: {row.error}")
            if self.enabled:
                self._write(f"[{self.before + self.done}/{self.before + self.total}] {task}: {what}, "
                            f"{row.wall_seconds or 0:.1f} s")
            if self.bar is not None:
                self._postfix()
                self.bar.update(1)

    def close(self) -> None:
        for bar in self.running.values():
            bar.close()
        self.running.clear()
        if self.bar is not None:
            self.ticker.close()
            self.bar.close()
            self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
