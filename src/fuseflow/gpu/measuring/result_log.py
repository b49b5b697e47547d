"""The append-only record of a GPU run: one JSON line per event, written and flushed as it happens, so
a run that is killed still leaves every result it reached; a half-written last line is ignored.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "results.jsonl")
    >>> append(path, Record("done", "smoke:G1:1", "smoke", "G1", 1, status="ok"))
    >>> with open(path, "a") as f: _ = f.write('{"event": "do')     # a run killed mid-line
    >>> [(r.key, r.status) for r in read_records(path)]
    [('smoke:G1:1', 'ok')]
"""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field

_WRITING = threading.Lock()      # threads of one process append whole lines, one at a time
STATUSES = ("ok", "wrong", "fault", "timeout", "error", "skipped")   # "wrong": ran, outside tolerance


@dataclass(frozen=True)
class Record:
    """One event of a run: a job ``start``ed or ``done`` (with its status), or run facts (``chain``, ``env``,
    ``stage``, ``sanitize``)."""

    event: str
    key: str = ""               # the job's key (stage:chain:rank), or a fact's name
    stage: str = ""
    chain: str = ""
    rank: int = 0
    path: str = ""              # the kernel's code path (see kernel_jobs.code_path)
    status: str = ""
    reason: str = ""
    seconds: float = 0.0
    launch: dict | None = None  # LaunchParams.to_json() of the kernel, where one ran
    data: dict = field(default_factory=dict)
    at: float = 0.0             # unix time written

    def to_line(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), allow_nan=True)

    @classmethod
    def from_json(cls, data: dict) -> "Record":
        return cls(**data)


def append(path, record: Record) -> None:
    """Append ``record`` as one line and push it to disk before returning."""
    if not record.at:
        record = Record(**{**asdict(record), "at": time.time()})
    with _WRITING, open(path, "ab") as f:
        cut = f.tell() > 0 and _last_byte(path) != b"\n"     # a line left half-written by a killed child
        f.write((("\n" if cut else "") + record.to_line() + "\n").encode())
        f.flush()
        os.fsync(f.fileno())


def _last_byte(path) -> bytes:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)


def read_records(path, offset: int = 0) -> list[Record]:
    """Every whole record of the file from byte ``offset`` (lines cut short by a kill are skipped)."""
    return read_from(path, offset)[0]


def read_from(path, offset: int = 0) -> tuple[list[Record], int]:
    """The whole records after byte ``offset`` and the offset after the last whole line."""
    if not os.path.exists(path):
        return [], offset
    with open(path, "rb") as f:
        f.seek(offset)
        blob = f.read()
    out, used = [], 0
    for raw in blob.splitlines(keepends=True):
        if not raw.endswith(b"\n"):
            break
        used += len(raw)
        try:
            out.append(Record.from_json(json.loads(raw)))
        except (ValueError, TypeError):    # a line garbled by a kill mid-write
            continue
    return out, offset + used


def final_results(records) -> dict[str, Record]:
    """The last ``done`` record of each job key (a rerun's result replaces the first run's)."""
    out = {}
    for r in records:
        if r.event == "done":
            out[r.key] = r
    return out
