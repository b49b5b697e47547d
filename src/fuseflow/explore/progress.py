"""A small progress bar with an ETA on stderr (redrawn in place on a terminal, a line per 10%
otherwise).

    >>> import io
    >>> out = io.StringIO()
    >>> bar = Progress(4, out=out, tty=False)
    >>> for _ in range(4):
    ...     bar.update(note="ok")
    >>> bar.close()
    >>> out.getvalue().splitlines()[-1].startswith("sweep: 4/4 100%")
    True
"""
from __future__ import annotations

import sys
import time


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    def __init__(self, total: int, label: str = "sweep", out=None, tty: bool | None = None, width: int = 24):
        self.total, self.label, self.width = total, label, width
        self.out = out if out is not None else sys.stderr
        self.tty = self.out.isatty() if tty is None else tty
        self.done = 0
        self.errors = 0
        self.start = time.perf_counter()
        self._last_tenth = -1
        self._closed = False

    def line(self, note: str = "") -> str:
        elapsed = time.perf_counter() - self.start
        share = self.done / self.total if self.total else 1.0
        filled = int(round(share * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        eta = elapsed / self.done * (self.total - self.done) if self.done else None
        text = (f"{self.label}: {self.done}/{self.total} {share:4.0%} [{bar}] {_duration(elapsed)} elapsed"
                + (f", ETA {_duration(eta)}" if eta is not None and self.done < self.total else ""))
        if self.errors:
            text += f", {self.errors} failed"
        return text + (f"  {note}" if note else "")

    def update(self, n: int = 1, note: str = "", error: bool = False) -> None:
        self.done += n
        self.errors += int(error)
        if self.tty:
            self.out.write("\r" + self.line(note[:40])[:150].ljust(110))
            self.out.flush()
        else:
            tenth = int(10 * self.done / self.total) if self.total else 10
            if tenth != self._last_tenth or self.done == self.total:
                self._last_tenth = tenth
                self.out.write(self.line() + "\n")
                self.out.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.tty:
            self.out.write("\n")
            self.out.flush()
