"""Progress on stderr, drawn with tqdm on a terminal only (nothing in logs and pipes).

`TaskProgress` counts finished tasks of a sweep. `RunProgress` follows one simulation and is
live from its first moment: a ticker redraws the elapsed time every half second, so a long
first kernel never looks like a hang. It takes two callbacks: `on_kernel(done, total)` after
each kernel (what `simulate` reports today) and `on_events(done_events, estimated_events)` for
token events inside the running kernel (the engine reports them as it goes). With the
heuristic's per-kernel estimates the bar counts token events, so kernels weigh what they cost.
`numba_notice` prints one line when numba starts compiling the simulator's kernels (first use
only: compiled kernels are cached on disk).

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

from numba.core import event
from tqdm import tqdm

TICK_SECONDS = 0.5
BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar:24}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"
EVENTS_FORMAT = "{desc}: {percentage:3.0f}%|{bar:24}| {n:.3g}/{total:.3g} token events [{elapsed}<{remaining}{postfix}]"
OPEN_FORMAT = "{desc}: [{elapsed}{postfix}]"


def is_terminal(out) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


class _Ticker:
    """Redraws a bar every `TICK_SECONDS` from a daemon thread until stopped."""

    def __init__(self, bar: tqdm):
        self.bar, self.stop = bar, threading.Event()
        self.thread = threading.Thread(target=self._run, name="fuseflow-progress", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(TICK_SECONDS):
            self.bar.refresh()

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


def numba_notice(out=None):
    """A context in which numba's first compilation prints a one-line notice on `out` (stderr),
    once per process."""
    class CompileNotice(event.Listener):
        def on_start(self, ev) -> None:
            if not _NOTICE_GIVEN.is_set():
                _NOTICE_GIVEN.set()
                tqdm.write("fuseflow: compiling the simulator's kernels with numba (first run only, "
                           "cached afterwards)", file=out if out is not None else sys.stderr)

        def on_end(self, ev) -> None:
            pass

    return event.install_listener("numba:compile", CompileNotice())
