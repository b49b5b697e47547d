"""Tensor values as fuseflow passes them around: dense numpy arrays, or scipy.sparse arrays for
large sparse matrices, so that data the size of a real graph never becomes a dense n x n array.

A value stays sparse when it is a 2-D sparse matrix (scipy or torch) whose dense form would hold
more than `DENSE_LIMIT` elements; everything smaller is dense, which keeps small programs on the
simplest path. Dense arrays this module makes are checked against the memory available first.

    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.random(4000, 4000, density=0.001, format="csr", random_state=0)
    >>> v = as_value(A, dense_limit=1000)
    >>> is_sparse(v), v.shape, v.nnz == A.nnz
    (True, (4000, 4000), True)
    >>> coords, vals = entries(v, fill=0.0)
    >>> len(coords), vals.shape == (A.nnz,)
    (2, True)
    >>> is_sparse(as_value(np.eye(3)))
    False
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import UserError
from ..memory import Budget

DENSE_LIMIT = 1 << 24  # elements: larger 2-D sparse matrices stay sparse


def is_sparse(value) -> bool:
    return sp.issparse(value)


def _from_torch(value):
    import torch  # noqa: PLC0415 - torch is heavy; only torch inputs need it

    value = value.detach().cpu()
    if value.layout == torch.strided:
        return value.numpy()
    if value.dim() == 2:
        coo = value.to_sparse_coo().coalesce()
        rows, cols = coo.indices().numpy()
        return sp.csr_array((coo.values().numpy(), (rows, cols)), shape=tuple(value.shape))
    return value.to_dense().numpy()


def as_value(value, dtype=np.float64, dense_limit: int = DENSE_LIMIT):
    """numpy array, scipy.sparse matrix/array or torch tensor (dense or sparse) -> a dense
    ndarray, or a canonical scipy `csr_array` (sorted, duplicates summed, explicit zeros dropped)
    for a 2-D sparse matrix of more than `dense_limit` elements."""
    if hasattr(value, "detach"):  # torch
        value = _from_torch(value)
    if sp.issparse(value):
        if value.ndim == 2 and value.shape[0] * value.shape[1] > dense_limit:
            out = sp.csr_array(value, dtype=dtype)
            out.sum_duplicates()
            out.eliminate_zeros()
            return out
        return densify(value, dtype=dtype)
    return np.asarray(value, dtype=dtype)


def densify(value, what: str = "a sparse tensor", dtype=np.float64) -> np.ndarray:
    """The dense array of a value, after checking that it fits in memory."""
    if not sp.issparse(value):
        return np.asarray(value, dtype=dtype)
    check_dense(value.shape, what)
    return np.asarray(value.toarray(), dtype=dtype)


def check_dense(shape, what: str) -> None:
    """MemoryLimitError when a dense float64 array of `shape` would not fit."""
    n = int(np.prod(shape, dtype=np.float64)) if len(shape) else 1
    if n > DENSE_LIMIT:
        Budget().check(8 * n, f"{what} as a dense {'x'.join(map(str, shape))} array")


def entries(value, fill: float = 0.0) -> tuple[list[np.ndarray], np.ndarray]:
    """(coordinates per dimension, values) of the entries that differ from `fill`, in row-major
    order. For a sparse value the background must be 0 (what scipy leaves out)."""
    if sp.issparse(value):
        if fill != 0.0:
            raise UserError(f"a sparse input with background {fill} (scipy leaves out zeros)",
                            fix="pass it as a dense array")
        csr = sp.csr_array(value)  # shares a csr_array's arrays; rows from its index pointers, no COO copy
        csr.sum_duplicates()
        rows = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr))
        cols, vals = csr.indices.astype(np.int64), csr.data.astype(np.float64, copy=False)
        keep = vals != 0
        return ([rows, cols], vals) if keep.all() else ([rows[keep], cols[keep]], vals[keep])
    array = np.asarray(value, dtype=np.float64)
    mask = ~(array == fill) if not np.isnan(fill) else ~np.isnan(array)
    coords = [c.astype(np.int64) for c in np.nonzero(mask)]
    return coords, array[mask]


def nnz(value, fill: float = 0.0) -> int:
    if sp.issparse(value):
        return int(value.count_nonzero())
    return int(np.count_nonzero(np.asarray(value) != fill))


def shape_of(value) -> tuple[int, ...]:
    return tuple(int(d) for d in np.shape(value)) if not sp.issparse(value) else tuple(value.shape)
