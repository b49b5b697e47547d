"""Planetoid raw files (`ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}`) read without network.

The files are Python 2 pickles. They are read with `SafeUnpickler`, which admits only the few
numpy/scipy/collections globals those files contain and refuses everything else (so a crafted
file cannot run code); the graph is assembled as PyG's `Planetoid` does.
"""
from __future__ import annotations

import copyreg
import io
import math
import pickle
from collections import defaultdict
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import UserError
from ..files import read_file
from ..memory import Budget
from .graphs import Graph, from_edges

PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph")


def _latin1_encode(text, encoding="utf-8"):
    """`_codecs.encode` as Python 3 uses it to pickle bytes at protocols < 3; latin-1 only."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1", "iso-8859-1"):
        raise pickle.UnpicklingError(f"_codecs.encode is only admitted for latin-1 bytes, got {encoding!r}")
    return text.encode("latin-1")


def _empty_bytes(*args):
    """`bytes()` as Python 3 uses it to pickle b"" at protocols < 3; no arguments admitted."""
    if args:
        raise pickle.UnpicklingError("bytes(...) with arguments is not admitted")
    return b""


def _allowed() -> dict[tuple[str, str], object]:
    reconstruct = np.arange(1).__reduce__()[0]  # numpy{,._core}.multiarray._reconstruct
    scalar = np.float64(0).__reduce__()[0]  # numpy{,._core}.multiarray.scalar
    table: dict[tuple[str, str], object] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("collections", "defaultdict"): defaultdict,
        ("_codecs", "encode"): _latin1_encode,
    }
    for core in ("numpy.core.multiarray", "numpy._core.multiarray"):
        table[(core, "_reconstruct")] = reconstruct
        table[(core, "scalar")] = scalar
    for module in ("scipy.sparse.csr", "scipy.sparse._csr", "scipy.sparse"):
        table[(module, "csr_matrix")] = sp.csr_matrix
    for builtins in ("__builtin__", "builtins"):
        table[(builtins, "list")] = list
        table[(builtins, "object")] = object
        table[(builtins, "bytes")] = _empty_bytes
    for module in ("copy_reg", "copyreg"):
        table[(module, "_reconstructor")] = copyreg._reconstructor
    return table


class SafeUnpickler(pickle.Unpickler):
    """Unpickler for Planetoid files: only the globals in `_allowed()`; anything else is refused
    with a UserError naming the global and the file, before it could be called."""

    def __init__(self, file, where: str):
        super().__init__(file, encoding="latin1")
        self.where = where
        self.table = _allowed()

    def find_class(self, module: str, name: str):
        try:
            return self.table[(module, name)]
        except KeyError:
            raise UserError(f"refusing to unpickle {module}.{name}: Planetoid files may only hold "
                            "numpy arrays, scipy CSR matrices and a defaultdict of lists",
                            where=self.where, fix="use the original Planetoid files or convert the "
                            "graph to .npz (docs/datasets.md)") from None


def safe_load(path: Path):
    """Unpickle one file with `SafeUnpickler`; every failure is a one-line UserError."""
    where = str(path)
    if not path.exists():
        raise UserError("Planetoid file not found", where=where, fix="put all ind.<name>.* files in one directory")
    data = read_file(path, where)
    try:
        return SafeUnpickler(io.BytesIO(data), where).load()
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - a malformed pickle raises many kinds of errors
        raise UserError(f"malformed Planetoid pickle ({type(e).__name__}: {e})", where=where) from None


def _matrix(obj, path: Path, budget: Budget, dense_dtype=np.float32) -> np.ndarray:
    """A Planetoid array: a scipy CSR (rebuilt from its stored fields) or a numpy array, as dense
    (its dense size checked against `budget` first)."""
    if isinstance(obj, sp.csr_matrix):
        fields = vars(obj)
        try:
            shape = tuple(int(d) for d in (fields.get("_shape") or fields["shape"]))
            budget.check(math.prod(shape) * np.dtype(dense_dtype).itemsize, f"{path} (dense {shape})")
            obj = sp.csr_matrix((fields["data"], fields["indices"], fields["indptr"]), shape=shape)
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            raise UserError(f"malformed CSR matrix in Planetoid file ({e})", where=str(path)) from None
        return obj.toarray().astype(dense_dtype)
    if isinstance(obj, np.ndarray) and obj.ndim == 2 and obj.dtype.kind in "biuf":
        return obj.astype(dense_dtype)
    raise UserError(f"expected a 2-d array or CSR matrix, found {type(obj).__name__}", where=str(path))


def _test_index(path: Path) -> np.ndarray:
    if not path.exists():
        raise UserError("Planetoid file not found", where=str(path))
    lines = read_file(path, str(path)).decode("ascii", errors="replace").split()
    bad = next((t for t in lines if not (t.isascii() and t.isdigit() and len(t) <= 18)), None)
    if bad is not None:
        raise UserError(f"test index must hold one non-negative integer per line, found {bad[:20]!r}",
                        where=str(path))
    index = np.array([int(t) for t in lines], dtype=np.int64)
    if index.size == 0 or len(np.unique(index)) != index.size or index.min() < 0:
        raise UserError("test index must be non-empty, non-negative and without repeats", where=str(path))
    return index


def _node_ids(values, what: str, path: Path) -> list[int]:
    """The node ids of an adjacency list, refusing anything but whole numbers (a 1.5 would
    otherwise be truncated to a real node)."""
    ids = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise UserError(f"{what} holds {value!r}, not a node id", where=str(path),
                            fix="node ids are non-negative integers")
        ids.append(int(value))
    return ids


def _edges(graph, n: int, path: Path, budget: Budget) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of a dict of adjacency lists, its size checked before anything is built: a
    small pickle can list one shared list under many keys."""
    if not isinstance(graph, dict) or not all(isinstance(v, (list, tuple)) for v in graph.values()):
        raise UserError(f"expected a dict of adjacency lists, found {type(graph).__name__}", where=str(path),
                        fix="adjacency lists must map node ids to lists of node ids")
    total = sum(len(v) for v in graph.values())
    # rows and cols (8 bytes each), both directions, then scipy's copies while building the CSR
    budget.check(total * 8 * 2 * 4, f"{path} ({total:,} adjacency entries)")
    rows, cols = [], []
    for key, values in graph.items():
        (node,) = _node_ids([key], "a key of the adjacency dict", path)
        targets = _node_ids(values, f"the list of node {node}", path)
        rows.extend([node] * len(targets))
        cols.extend(targets)
    rows, cols = np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)
    bad = (rows < 0) | (rows >= n) | (cols < 0) | (cols >= n)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise UserError(f"edge {rows[i]} -> {cols[i]} names a node outside 0..{n - 1}", where=str(path))
    return rows, cols


def load_planetoid(directory, name: str, budget: Budget | None = None) -> Graph:
    """Read `ind.<name>.*` from `directory` and assemble the graph as PyG's Planetoid does:
    test rows moved to their test indices, zero rows for test nodes missing from `tx` (CiteSeer's
    isolated nodes), labels = argmax of the one-hot rows, symmetric adjacency without self loops."""
    directory = Path(directory)
    budget = budget or Budget()
    path = {p: directory / f"ind.{name}.{p}" for p in PARTS + ("test.index",)}
    raw = {p: safe_load(path[p]) for p in PARTS}
    x, tx, allx, y, ty, ally = (_matrix(raw[p], path[p], budget) for p in PARTS[:6])
    test_index = _test_index(path["test.index"])

    def need(cond: bool, what: str, where: str) -> None:
        if not cond:
            raise UserError(what, where=where)

    arrays = {"x": x, "tx": tx, "allx": allx, "y": y, "ty": ty, "ally": ally}
    for a, b in (("x", "y"), ("tx", "ty"), ("allx", "ally")):
        need(arrays[a].shape[0] == arrays[b].shape[0], f"ind.{name}.{a} has {arrays[a].shape[0]} "
             f"rows but ind.{name}.{b} has {arrays[b].shape[0]}", str(path[b]))
    need(x.shape[1] == tx.shape[1] == allx.shape[1],
         f"feature widths differ: x {x.shape[1]}, tx {tx.shape[1]}, allx {allx.shape[1]}", str(directory))
    need(y.shape[1] == ty.shape[1] == ally.shape[1],
         f"label widths differ: y {y.shape[1]}, ty {ty.shape[1]}, ally {ally.shape[1]}", str(directory))
    need(len(test_index) == tx.shape[0],
         f"{len(test_index)} test indices but ind.{name}.tx has {tx.shape[0]} rows", str(path["test.index"]))
    ordered = np.sort(test_index)
    low, high = int(ordered[0]), int(ordered[-1])
    need(low == allx.shape[0], f"the smallest test index is {low}, expected {allx.shape[0]} "
         f"(the row count of ind.{name}.allx)", str(path["test.index"]))
    budget.check((high + 1) * (tx.shape[1] + ty.shape[1]) * 4 * 3,
                 f"{path['test.index']} (largest test index {high:,}: {high + 1:,} nodes)")
    tx_ext = np.zeros((high - low + 1, tx.shape[1]), dtype=tx.dtype)
    tx_ext[ordered - low] = tx
    ty_ext = np.zeros((high - low + 1, ty.shape[1]), dtype=ty.dtype)
    ty_ext[ordered - low] = ty
    features = np.concatenate([allx, tx_ext])
    features[test_index] = features[ordered]
    labels = np.concatenate([ally, ty_ext]).argmax(axis=1).astype(np.int64)
    labels[test_index] = labels[ordered]
    n = len(labels)

    rows, cols = _edges(raw["graph"], n, path["graph"], budget)
    return from_edges(name, rows, cols, n, features, labels, symmetrize=True)
