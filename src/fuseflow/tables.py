"""Results as tables: rows of plain values, pandas DataFrames and CSV files.

A simulation result gives one row per kernel; a study one row per schedule; a heuristic
estimate one row per kernel; a list of dicts (e.g. sweep database rows) is taken as it is.

    >>> import fuseflow
    >>> r = fuseflow.simulate(fuseflow.from_mlir("tests/mlir/spmv.mlir"), "unfused", density=0.2)
    >>> rows = table_rows(r)
    >>> [row["kernel"] for row in rows], rows[0]["cycles"] == r.cycles
    (['k0:y'], True)
    >>> bool(to_frame(r).loc[0, "flops"] == r.flops)
    True
"""
from __future__ import annotations

import csv
import dataclasses
import io
import os

from .errors import UserError


def _kernel_rows(result) -> list[dict]:
    rows = []
    for k in result.kernels:
        row = {"program": result.program, "schedule": result.schedule, "kernel": getattr(k, "name", k.index),
               "index": k.index, "group": ",".join(k.group), "order": ",".join(k.order)}
        row.update({f.name: getattr(k, f.name) for f in dataclasses.fields(k)
                    if f.name not in ("index", "name", "group", "order")})
        rows.append(row)
    return rows


def table_rows(result) -> list[dict]:
    """Rows of plain values: `SimResult` and `Estimate` per kernel, `StudyResult` per schedule,
    a list of dicts as given."""
    if isinstance(result, list):  # dicts, or a study's `ResultRow`s
        return [row.study_json() if hasattr(row, "study_json") else dict(row) for row in result]
    if hasattr(result, "rows"):  # StudyResult
        return result.to_json()
    if hasattr(result, "kernels") and hasattr(result, "schedule"):  # SimResult
        return _kernel_rows(result)
    if hasattr(result, "kernels"):  # heuristic Estimate
        return [{**dataclasses.asdict(k), "group": ",".join(k.group), "order": ",".join(k.order)}
                for k in result.kernels]
    raise UserError(f"cannot make a table of a {type(result).__name__}", "to_frame",
                    "pass a simulation result, a study result, an estimate or a list of dicts")


def to_frame(result):
    """A pandas DataFrame of `table_rows(result)`: `result` is a `SimResult` or an `Estimate`
    (a row per kernel), a `StudyResult` (a row per schedule) or a list of dicts (pandas is an
    optional dependency)."""
    try:
        import pandas  # noqa: PLC0415 - an optional dependency, needed only here
    except ImportError:
        raise UserError("to_frame needs pandas", "to_frame", "pip install pandas (or fuseflow[frames])") from None
    return pandas.DataFrame.from_records(table_rows(result))


def to_csv(result, path=None) -> str:
    """`table_rows(result)` as CSV text (`result` as for `to_frame`); also written to `path` (a
    file name) if given."""
    rows = table_rows(result)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    text = buffer.getvalue()
    if path is not None:
        with open(os.fspath(path), "w", newline="") as handle:
            handle.write(text)
    return text
