"""The SQLite store of a sweep: one row per (program, schedule, data point, seed).

Every row is committed in its own transaction, and the key is unique (`INSERT OR IGNORE`), so a
killed sweep restarts where it stopped: finished rows are skipped, none is lost or written twice.

    >>> db = SweepDB(":memory:")
    >>> row = {"program": "p.mlir", "schedule": "full", "data": "density=0.1", "seed": 0,
    ...        "status": "ok", "cycles": 120, "flops": 40, "mem_reads": 10, "mem_writes": 5}
    >>> db.insert(row), db.insert(row)
    (True, False)
    >>> db.done_keys() == {("p.mlir", "full", "density=0.1", 0)}, db.rows()[0]["bytes"]
    (True, 60)
"""
from __future__ import annotations

import datetime
import os
import sqlite3

from ..errors import UserError

COLUMNS = [
    # name, SQL type, meaning
    ("id", "INTEGER PRIMARY KEY", "row number (insertion order)"),
    ("program", "TEXT NOT NULL", "MLIR path, or model:NAME"),
    ("schedule", "TEXT NOT NULL", "the schedule string simulated"),
    ("data", "TEXT NOT NULL", "data point key: 'density=0.05', 'dataset=karate', 'density=0.1 block=4'"),
    ("seed", "INTEGER NOT NULL", "seed of the generated inputs (and model weights)"),
    ("label", "TEXT", "granularity the schedule came from (unfused, partial, full, random3, ...)"),
    ("program_name", "TEXT", "the program's own name"),
    ("dataset", "TEXT", "dataset of the data point, if any"),
    ("density", "REAL", "density of the random sparse inputs, if any"),
    ("block", "INTEGER", "block size of block-sparse random inputs, if any"),
    ("engine", "TEXT", "simulator engine that ran (fast or oracle)"),
    ("status", "TEXT NOT NULL", "ok | error | pruned"),
    ("cycles", "INTEGER", "simulated cycles (sum over kernels)"),
    ("flops", "INTEGER", "simulated floating-point operations"),
    ("mem_reads", "INTEGER", "simulated memory words read"),
    ("mem_writes", "INTEGER", "simulated memory words written"),
    ("bytes", "INTEGER", "(mem_reads + mem_writes) * 4"),
    ("kernels", "INTEGER", "number of kernels"),
    ("verified", "INTEGER", "1 when every output matched the numpy reference"),
    ("wall_seconds", "REAL", "wall time of the simulation (compile + simulate + verify)"),
    ("error", "TEXT", "one-line error of a failed schedule"),
    ("est_cycles", "REAL", "heuristic cycle estimate"),
    ("est_flops", "REAL", "heuristic flop estimate"),
    ("est_bytes", "REAL", "heuristic bytes moved"),
    ("est_seconds", "REAL", "time the heuristic took"),
    ("created", "TEXT", "UTC time the row was written"),
]
NAMES = [c[0] for c in COLUMNS]
KEY = ("program", "schedule", "data", "seed")
SCHEMA = ("CREATE TABLE IF NOT EXISTS runs (\n    "
          + ",\n    ".join(f"{name} {kind}" for name, kind, _ in COLUMNS)
          + ",\n    UNIQUE (program, schedule, data, seed)\n)")


class SweepDB:
    def __init__(self, path: str):
        self.path = path
        try:
            self.conn = sqlite3.connect(path, timeout=30, isolation_level=None)  # autocommit; explicit BEGIN
        except sqlite3.Error as err:
            raise UserError(f"cannot open database {path}: {err}", "--db") from None
        self.conn.row_factory = sqlite3.Row
        try:
            if path != ":memory:":
                self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL" if path == ":memory:" else "PRAGMA synchronous=FULL")
            self.conn.execute(SCHEMA)
        except sqlite3.DatabaseError as err:
            raise UserError(f"{path} is not a sweep database: {err}", "--db") from None
        have = {r["name"] for r in self.conn.execute("PRAGMA table_info(runs)")}
        missing = [n for n in NAMES if n not in have]
        if missing:
            raise UserError(f"{path} has a runs table without {', '.join(missing)}", "--db",
                            "use a new database file")

    def close(self) -> None:
        self.conn.close()

    def done_keys(self) -> set[tuple]:
        return {tuple(r) for r in self.conn.execute("SELECT program, schedule, data, seed FROM runs")}

    def insert(self, row: dict) -> bool:
        """Write one row in its own transaction; False when its key is already there."""
        row = dict(row)
        if row.get("bytes") is None and row.get("mem_reads") is not None and row.get("mem_writes") is not None:
            row["bytes"] = (row["mem_reads"] + row["mem_writes"]) * 4
        row.setdefault("created", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        unknown = sorted(set(row) - set(NAMES))
        if unknown:
            raise ValueError(f"unknown columns {unknown}")
        names = [n for n in NAMES if n in row and n != "id"]
        sql = f"INSERT OR IGNORE INTO runs ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})"
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            cursor = self.conn.execute(sql, [row[n] for n in names])
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return cursor.rowcount == 1

    def rows(self, where: str = "", params=()) -> list[dict]:
        sql = "SELECT * FROM runs" + (f" WHERE {where}" if where else "") + " ORDER BY id"
        return [dict(r) for r in self.conn.execute(sql, params)]

    def count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


def open_existing(path: str) -> SweepDB:
    if not os.path.isfile(path):
        raise UserError(f"no sweep database {path}", "plot", "run `fuseflow sweep ... --db FILE` first")
    return SweepDB(path)
