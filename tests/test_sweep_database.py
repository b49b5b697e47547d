"""Databases that are ours: a sweep database carries a schema marker; a foreign, corrupted or
keyless file is refused with one line and left byte for byte as it was."""
from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from fuseflow import UserError
from fuseflow.cli import main
from fuseflow.studies.db import APPLICATION_ID, COLUMNS, SCHEMA_VERSION, SweepDB
from fuseflow.studies.row import ResultRow

SPMV = str(Path(__file__).parent / "mlir" / "spmv.mlir")
ROW = ResultRow("full", program="p.mlir", data="density=0.1", seed=0)


def fingerprint(path: Path) -> tuple:
    """The file's bytes and the directory entries beside it (a WAL switch adds -wal/-shm files)."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), sorted(os.listdir(path.parent))


def refused(path: Path, capsys, command=("sweep", SPMV, "-q", "--engine", "oracle")) -> str:
    before = fingerprint(path)
    assert main([*command, "--db", str(path)] if command[0] == "sweep" else [*command, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fuseflow: error: ") and err.count("\n") == 1, err
    assert fingerprint(path) == before, "the refused file was changed"
    return err


def test_a_new_database_carries_the_marker(tmp_path):
    db = SweepDB(str(tmp_path / "s.db"))
    assert db.insert(ROW)
    db.close()
    conn = sqlite3.connect(tmp_path / "s.db")
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    reopened = SweepDB(str(tmp_path / "s.db"))
    assert reopened.count() == 1 and not reopened.insert(ROW)


def sqlite_file(path: Path, *statements: str) -> Path:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path


def test_an_unrelated_sqlite_file_is_left_alone(tmp_path, capsys):
    path = sqlite_file(tmp_path / "app.db", "CREATE TABLE users (name TEXT)", "INSERT INTO users VALUES ('ada')")
    err = refused(path, capsys)
    assert "not a fuseflow sweep database (it holds tables users); it was left untouched" in err
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
    assert "not a fuseflow sweep database" in refused(path, capsys, ("plot",))


def test_another_applications_marker(tmp_path, capsys):
    path = sqlite_file(tmp_path / "other.db", "PRAGMA application_id=1234", "CREATE TABLE runs (x)")
    assert "(it holds application id 0x4d2 and tables runs)" in refused(path, capsys)


def legacy_runs(path: Path, unique: bool) -> None:
    """A runs table as fuseflow wrote it before the marker, with or without the unique key."""
    columns = ",\n".join(f"{name} {kind}" for name, kind, _ in COLUMNS)
    key = ",\nUNIQUE (program, schedule, data, seed)" if unique else ""
    sqlite_file(path, f"CREATE TABLE runs ({columns}{key})")


def test_a_runs_table_without_the_unique_key(tmp_path, capsys):
    path = tmp_path / "keyless.db"
    legacy_runs(path, unique=False)
    assert "no unique key on (program, schedule, data, seed)" in refused(path, capsys)


def test_an_unmarked_database_of_an_earlier_fuseflow_is_adopted(tmp_path, capsys):
    path = tmp_path / "old.db"
    legacy_runs(path, unique=True)
    assert main(["sweep", SPMV, "-g", "full", "--engine", "oracle", "--db", str(path), "-q"]) == 0
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_a_corrupted_database(tmp_path, capsys):
    path = tmp_path / "s.db"
    assert main(["sweep", SPMV, "-g", "full", "-g", "unfused", "--density", "0.1,0.2,0.3", "--engine", "oracle",
                 "--db", str(path), "-q"]) == 0
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) >= 2 * page
    data[page: page + 12] = b"\xff" * 12  # the runs table's root page: its b-tree header
    path.write_bytes(bytes(data))
    err = refused(path, capsys)
    assert "corrupted" in err or "not a readable sweep database" in err


@pytest.mark.parametrize("content, needle", [(b"hello, this is text", "not an SQLite database"),
                                             (b"SQLite format 3\x00" + b"\x00" * 50, "not a readable")])
def test_files_that_are_not_databases(content, needle, tmp_path, capsys):
    path = tmp_path / "x.db"
    path.write_bytes(content)
    assert needle in refused(path, capsys)


def test_a_directory_as_database(tmp_path):
    with pytest.raises(UserError, match="is a directory"):
        SweepDB(str(tmp_path))
