"""The SQLite store of a sweep: one row per (program, schedule, data point, seed).

Every row is committed in its own transaction, and the key is unique (`INSERT OR IGNORE`), so a
killed sweep restarts where it stopped: finished rows are skipped, none is lost or written twice.
The file carries a schema marker (SQLite's application id "FFLW" and a schema version); a file
that is not a sweep database, a corrupted one, or a `runs` table without the unique key is
refused before anything in it changes.

    >>> db = SweepDB(":memory:")
    >>> row = ResultRow("full", program="p.mlir", data="density=0.1", seed=0, cycles=120, flops=40,
    ...                 mem_reads=10, mem_writes=5)
    >>> db.insert(row), db.insert(row)
    (True, False)
    >>> db.done_keys() == {("p.mlir", "full", "density=0.1", 0)}, db.rows()[0].bytes
    (True, 60)
"""
from __future__ import annotations

import contextlib
import datetime
import os
import sqlite3
import urllib.parse

from ..errors import UserError
from .row import ResultRow

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
    ("status", "TEXT NOT NULL", "ok | error | pruned | estimated (a suite's row not simulated: see reason)"),
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
# schema 2: the columns of a suite's rows (`fuseflow study suite`), added to older files on open
COLUMNS_2 = [
    ("suite", "TEXT", "the suite that wrote the row, if any"),
    ("schedule_text", "TEXT", "the schedule string a suite's preset stands for"),
    ("model_cycles", "INTEGER", "cycles of the whole model a few simulated decoders stand for"),
    ("max_occupancy", "INTEGER", "largest channel occupancy seen"),
    ("max_abs_error", "REAL", "largest difference from the numpy reference"),
    ("est_mem", "REAL", "heuristic memory words (reads + writes)"),
    ("reason", "TEXT", "why a row was estimated, not simulated"),
    ("worker", "TEXT", "the worker that ran the row (host:pid)"),
]
# schema 3: how a row's cycles were obtained (a sampled row's are an estimate with a 95% interval)
COLUMNS_3 = [
    ("mode", "TEXT", "whole | sharded | sampled (cycles estimated from a sample of windows) | heuristic"),
    ("method", "TEXT", "how the cycles were obtained or combined, in words"),
    ("cycles_low", "INTEGER", "low end of the cycles' 95% interval (sampled rows; else the cycles)"),
    ("cycles_high", "INTEGER", "high end of the cycles' 95% interval (sampled rows; else the cycles)"),
    ("sampled_fraction", "REAL", "share of the outer-loop windows simulated (1 for a whole run)"),
]
ADDED = {2: COLUMNS_2, 3: COLUMNS_3}  # the columns each schema version added
COLUMNS = COLUMNS + COLUMNS_2 + COLUMNS_3
NAMES = [c[0] for c in COLUMNS]
# a suite's runs: wall time, kept up to date while it runs (a killed session keeps its last value)
SESSIONS = ("CREATE TABLE IF NOT EXISTS sessions (id INTEGER PRIMARY KEY, suite TEXT NOT NULL, "
            "started TEXT NOT NULL, seconds REAL NOT NULL DEFAULT 0, tasks INTEGER, finished INTEGER, "
            "workers INTEGER, executor TEXT, max_memory INTEGER)")
KEY = ("program", "schedule", "data", "seed")
SCHEMA = ("CREATE TABLE IF NOT EXISTS runs (\n    "
          + ",\n    ".join(f"{name} {kind}" for name, kind, _ in COLUMNS)
          + ",\n    UNIQUE (program, schedule, data, seed)\n)")


APPLICATION_ID = 0x46464C57  # "FFLW" in the SQLite header: a fuseflow sweep database
SCHEMA_VERSION = 3  # PRAGMA user_version of the layout above (1: without COLUMNS_2 and sessions; 2: without
# COLUMNS_3)
SQLITE_MAGIC = b"SQLite format 3\x00"
NEW_FILE = "give a new file name with --db"


def _refuse(path: str, why: str, fix: str = NEW_FILE):
    raise UserError(f"{why}; it was left untouched", path, fix)


def _check_file(path: str) -> bool:
    """Whether `path` already holds data; refuses a directory or a file that is not SQLite,
    before SQLite opens (and could change) it."""
    if os.path.isdir(path):
        raise UserError(f"{path} is a directory", "--db", "give a database file name")
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise UserError(f"directory {directory} does not exist", "--db", f"create it first (mkdir -p {directory})")
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        return False
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}", "--db") from None
    if head and head != SQLITE_MAGIC:
        _refuse(path, "not an SQLite database")
    return bool(head)


class SweepDB:
    """A sweep database: created with a schema marker (SQLite's application id and user
    version), or opened after checking that marker, the `runs` table's columns and unique key,
    and the file's integrity; anything else is refused before it is changed. `readonly` opens
    an existing database without writing to it (`fuseflow plot`)."""

    def __init__(self, path: str, readonly: bool = False):
        self.path = path
        existing = path != ":memory:" and _check_file(path)
        try:
            if readonly:
                uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"
                self.conn = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)
            else:
                self.conn = sqlite3.connect(path, timeout=30, isolation_level=None)  # autocommit; explicit BEGIN
        except sqlite3.Error as err:
            raise UserError(f"cannot open database {path}: {err}", "--db") from None
        self.conn.row_factory = sqlite3.Row
        self.created = not existing and path != ":memory:"  # this object made the file
        try:
            fresh = self._check_marker(existing)
            if readonly:
                return
            if path != ":memory:":
                self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL" if path == ":memory:" else "PRAGMA synchronous=FULL")
            if fresh:
                self.conn.execute(SCHEMA)
                self.conn.execute(SESSIONS)
                self.conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
                self.conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            elif self.version < SCHEMA_VERSION:
                self._upgrade()
        except sqlite3.DatabaseError as err:
            self.conn.close()
            _refuse(path, f"not a readable sweep database ({err})")

    def _check_marker(self, existing: bool) -> bool:
        """True for a new (empty) database; else checks it is a sweep database fuseflow may use."""
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        app = self.conn.execute("PRAGMA application_id").fetchone()[0]
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        self.version = version or (1 if tables else SCHEMA_VERSION)  # files before the marker: schema 1
        if not tables and app == 0:
            return True
        if app not in (0, APPLICATION_ID) or (app == 0 and tables != {"runs"}):
            held = ([f"application id {app:#x}"] if app else []) + \
                ([f"tables {', '.join(sorted(tables))}"] if tables else [])
            _refuse(self.path, f"not a fuseflow sweep database (it holds {' and '.join(held)})")
        if version > SCHEMA_VERSION:
            _refuse(self.path, f"written by a newer fuseflow (schema {version}, this one reads {SCHEMA_VERSION})",
                    "upgrade fuseflow")
        if existing and self.conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
            _refuse(self.path, "the database is corrupted (SQLite's quick_check failed)",
                    "restore it from a copy, or start a new one with --db")
        have = {r["name"] for r in self.conn.execute("PRAGMA table_info(runs)")}
        later = {c[0] for v, columns in ADDED.items() if v > self.version for c in columns}
        needed = [n for n in NAMES if n not in later]
        missing = [n for n in needed if n not in have]
        if missing:
            _refuse(self.path, f"its runs table has no column {', '.join(missing)}")
        if not self._has_unique_key():
            _refuse(self.path, "its runs table has no unique key on (program, schedule, data, seed), so "
                               "concurrent or resumed sweeps could write rows twice")
        self._check_numbers("runs", [(n, kind) for n, kind, _ in COLUMNS if n in have])
        if "sessions" in tables:
            self._check_numbers("sessions", [(r["name"], r["type"]) for r in
                                             self.conn.execute("PRAGMA table_info(sessions)")])
        return False

    def _check_numbers(self, table: str, columns: list[tuple[str, str]]) -> None:
        """Refuse a file whose INTEGER or REAL column holds text or bytes in some row (edited by
        hand or by another program): the first such value, by table, column and row."""
        numeric = [name for name, kind in columns if kind.split()[0] in ("INTEGER", "REAL")]
        if not numeric:
            return
        test = " OR ".join(f"typeof({n}) NOT IN ('integer', 'real', 'null')" for n in numeric)
        row = self.conn.execute(f"SELECT rowid AS row_number, {', '.join(numeric)} FROM {table} "
                                f"WHERE {test} ORDER BY rowid LIMIT 1").fetchone()
        if row is None:
            return
        name = next(n for n in numeric if not isinstance(row[n], (int, float, type(None))))
        value = row[name]
        shown = repr(value if len(value) <= 40 else value[:40] + "...")
        _refuse(self.path, f"table {table}, column {name}, row {row['row_number']} holds "
                           f"{'text' if isinstance(value, str) else 'bytes'} {shown}, not a number",
                f"correct or delete that row (sqlite3 {self.path} \"DELETE FROM {table} WHERE rowid = "
                f"{row['row_number']}\"), or give another --db")

    def _upgrade(self) -> None:
        """An older schema brought up to this one in one transaction: 1 -> 2 the suite columns and
        the sessions table, 2 -> 3 the sampled rows' columns (older rows: NULL, read as whole runs)."""
        have = {r["name"] for r in self.conn.execute("PRAGMA table_info(runs)")}
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for name, kind, _ in (c for v, columns in ADDED.items() if v > self.version for c in columns):
                if name not in have:
                    self.conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")
            self.conn.execute(SESSIONS)
            self.conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.version = SCHEMA_VERSION

    def _has_unique_key(self) -> bool:
        for index in self.conn.execute("PRAGMA index_list(runs)").fetchall():
            if index["unique"]:
                columns = [r["name"] for r in self.conn.execute(f"PRAGMA index_info({index['name']!r})")]
                if set(columns) == set(KEY) and len(columns) == len(KEY):
                    return True
        return False

    def close(self) -> None:
        self.conn.close()

    @contextlib.contextmanager
    def kept_if_written(self):
        """Close the database when the block ends; if it raises, `abandon` it instead (a refused
        sweep or suite leaves no new file behind)."""
        try:
            yield self
        except BaseException:
            self.abandon()
            raise
        self.close()

    def abandon(self) -> None:
        """Close after a refused run: a file this object created and no row was written to is
        removed (with SQLite's side files), so a refused sweep or suite leaves nothing behind."""
        empty = self.created and self.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
        self.conn.close()
        for name in ([self.path, self.path + "-wal", self.path + "-shm"] if empty else []):
            if os.path.exists(name):
                os.remove(name)

    def done_keys(self) -> set[tuple]:
        return {tuple(r) for r in self.conn.execute("SELECT program, schedule, data, seed FROM runs")}

    def insert(self, result: ResultRow, also: tuple | None = None) -> bool:
        """Write one row in its own transaction (with `also`, (sql, params), run in it when the
        row is new); False when its key is already there."""
        row = result.to_db()
        row.setdefault("created", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        unknown = sorted(set(row) - set(NAMES))
        if unknown:
            raise ValueError(f"unknown columns {unknown}")
        names = [n for n in NAMES if n in row and n != "id"]
        sql = f"INSERT OR IGNORE INTO runs ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})"
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            cursor = self.conn.execute(sql, [row[n] for n in names])
            if also and cursor.rowcount == 1:
                self.conn.execute(*also)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return cursor.rowcount == 1

    def rows(self, where: str = "", params=()) -> list[ResultRow]:
        sql = "SELECT * FROM runs" + (f" WHERE {where}" if where else "") + " ORDER BY id"
        return [ResultRow.from_db(r) for r in self.conn.execute(sql, params)]

    def start_session(self, suite: str, tasks: int, workers: int | None, executor: str,
                      max_memory: int | None) -> int:
        """Record that a suite starts running `tasks` tasks; returns the session's id."""
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        cursor = self.conn.execute("INSERT INTO sessions (suite, started, tasks, finished, workers, executor, "
                                   "max_memory) VALUES (?, ?, ?, 0, ?, ?, ?)",
                                   (suite, now, tasks, workers, executor, max_memory))
        return cursor.lastrowid

    def insert_for_session(self, row: ResultRow, session: int, seconds: float) -> bool:
        """`insert` a suite's row and bring its session's wall time and count up to date, in one
        transaction (a suite killed at any moment loses nothing it finished)."""
        return self.insert(row, ("UPDATE sessions SET seconds = ?, finished = finished + 1 WHERE id = ?",
                                 (seconds, session)))

    def delete_failed(self, keys: list[tuple]) -> int:
        """Delete the rows of these keys whose status is `error` (to run them again); how many."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            deleted = sum(self.conn.execute("DELETE FROM runs WHERE program = ? AND schedule = ? AND data = ? AND "
                                            "seed = ? AND status = 'error'", key).rowcount for key in keys)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return deleted

    def sessions(self, suite: str | None = None) -> list[dict]:
        if "sessions" not in {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master")}:
            return []
        sql = "SELECT * FROM sessions" + (" WHERE suite = ?" if suite else "") + " ORDER BY id"
        return [dict(r) for r in self.conn.execute(sql, (suite,) if suite else ())]

    def count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


def open_existing(path: str) -> SweepDB:
    """An existing sweep database, read only."""
    if not os.path.isfile(path):
        raise UserError(f"no sweep database {path}", "plot", "run `fuseflow sweep ... --db FILE` first")
    return SweepDB(path, readonly=True)
