"""The reference evaluator's sparse paths: products with a sparse matrix operand, evaluated in
work proportional to its nonzeros (times the width of the dense operands), never as dense n x n
arrays.

An op qualifies when its body is a product of inputs and constants summed over its reduction
variables (or not reduced), and one operand (or two) is a scipy sparse matrix read with two
distinct variables. Then:

* a product whose output has the sparse operand's variables and whose dense operands use no
  others keeps the sparse operand's pattern (a masked or scaled matrix): a sparse result;
* a matrix product (the sparse matrix times a dense matrix or vector sharing one variable) is
  scipy's sparse-dense product;
* anything else with one sparse operand is evaluated per nonzero: its dense operands are
  gathered at the nonzero's coordinates, multiplied (einsum over the remaining variables) and
  summed into the output rows by a sparse scatter;
* two sparse operands: an elementwise product or a sparse-sparse matrix product.

`evaluate` returns None for ops outside these forms; the caller then densifies (within memory).

    >>> import numpy as np, scipy.sparse as sp
    >>> from fuseflow.ir.program import Access, IndexOp
    >>> from fuseflow.ir.expr import Binary, In
    >>> op = IndexOp(Access("Y", ("i", "j")), (Access("A", ("i", "k")), Access("X", ("k", "j"))),
    ...              Binary("mul", In(0), In(1)), reduce_vars=("k",), reduce_kind="sum")
    >>> A = sp.csr_array(np.array([[0.0, 2.0], [1.0, 0.0]])); X = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> evaluate(op, {"A": A, "X": X}, (2, 2)).tolist()
    [[6.0, 8.0], [1.0, 2.0]]
"""
from __future__ import annotations

import string

import numpy as np
import scipy.sparse as sp

from .expr import Const, product_factors
from .values import check_dense, entries, is_sparse

CHUNK_ELEMENTS = 1 << 23  # gathered dense elements per piece of nonzeros


def _dense_operand(access, value) -> tuple[np.ndarray, tuple[str, ...]]:
    """A dense operand with its constant indices removed (they index unit dims), and its vars."""
    arr = np.asarray(value)[tuple(0 if isinstance(i, int) else slice(None) for i in access.indices)]
    return arr, access.vars


def _arrange(arr: np.ndarray, vars_, want: tuple[str, ...]) -> np.ndarray:
    """arr (axes named vars_) with its axes in the order `want` (a permutation of vars_)."""
    return np.transpose(arr, [vars_.index(v) for v in want]) if tuple(vars_) != tuple(want) else arr


def evaluate(op, env, out_shape, dtype=np.float64):
    """The op's result (dense ndarray or scipy sparse), or None when no sparse path applies."""
    factors = product_factors(op.body)
    if factors is None or op.reduce_kind not in (None, "sum"):
        return None
    scale = dtype(1)
    sparse_ops, dense_ops = [], []
    for f in factors:
        if isinstance(f, Const):
            scale = scale * dtype(f.value)
            continue
        access = op.inputs[f.index]
        value = env[access.tensor]
        if is_sparse(value):
            if len(access.indices) != 2 or not all(isinstance(i, str) for i in access.indices) or \
                    access.indices[0] == access.indices[1]:
                return None
            sparse_ops.append((value, access.vars))
        else:
            dense_ops.append(_dense_operand(access, value))
    out_vars = op.output.vars
    covered = {v for _, vs in sparse_ops + dense_ops for v in vs} >= set(out_vars)
    if not covered or any(len(set(vs)) != len(vs) for _, vs in dense_ops):
        return None
    if len(sparse_ops) == 1:
        result = _one_sparse(sparse_ops[0], dense_ops, out_vars, out_shape, dtype)
    elif len(sparse_ops) == 2 and not dense_ops:
        result = _two_sparse(sparse_ops, out_vars)
    else:
        return None
    if result is None:
        return None
    return result * scale if scale != 1 else result


def _two_sparse(ops, out_vars):
    (a, av), (b, bv) = ops
    if set(av) == set(bv) == set(out_vars) and len(out_vars) == 2:
        a = a if av == out_vars else a.T
        b = b if bv == out_vars else b.T
        return sp.csr_array(a.multiply(b))
    shared = set(av) & set(bv)
    if len(shared) == 1 and len(out_vars) == 2:
        y = shared.pop()
        x, z = (v for v in av if v != y), (v for v in bv if v != y)
        x, z = next(x), next(z)
        if set(out_vars) == {x, z}:
            left = a if av == (x, y) else a.T
            right = b if bv == (y, z) else b.T
            product = sp.csr_array(left @ right)
            return product if out_vars == (x, z) else sp.csr_array(product.T)
    return None


def _one_sparse(sparse_op, dense_ops, out_vars, out_shape, dtype):
    S, (x, y) = sparse_op
    used = {v for _, vs in dense_ops for v in vs}
    if set(out_vars) == {x, y} and used <= {x, y}:  # the sparse pattern, scaled entrywise
        (rows, cols), vals = entries(S)
        where = {x: rows, y: cols}
        for arr, vs in dense_ops:
            vals = vals * arr[tuple(where[v] for v in vs)]
        out = sp.csr_array((vals, (rows, cols)), shape=S.shape)
        return out if out_vars == (x, y) else sp.csr_array(out.T)
    product = _matrix_product(S, x, y, dense_ops, out_vars)
    if product is not None:
        return product
    return _per_nonzero(S, x, y, dense_ops, out_vars, out_shape, dtype)


def _matrix_product(S, x, y, dense_ops, out_vars):
    """S @ D or S.T @ D for one dense operand D that shares exactly one of S's variables."""
    if len(dense_ops) != 1:
        return None
    D, dv = dense_ops[0]
    for keep, red, mat in ((x, y, S), (y, x, S.T)):
        if red not in dv or keep in dv or red in out_vars or keep not in out_vars:
            continue
        rest = tuple(v for v in dv if v != red)
        if len(rest) > 1 or set(out_vars) != {keep, *rest}:
            continue
        right = _arrange(D, dv, (red,) + rest)
        if out_vars[0] == keep:
            return np.asarray(sp.csr_array(mat) @ right)
        return _product_transposed(sp.csr_array(mat), right)
    return None


def _product_transposed(mat: sp.csr_array, right: np.ndarray) -> np.ndarray:
    """`(mat @ right).T` as a C-ordered array, made a block of `right`'s columns at a time: the
    product and its transpose are never both held (a GraphSAGE layer over the MAG twin, X @ W.T:
    2 GB each). Each entry sums the same products in the same order as the whole product's.

        >>> m = sp.csr_array(np.array([[1.0, 0.0], [2.0, 3.0]])); r = np.arange(6.0).reshape(2, 3)
        >>> bool(np.array_equal(_product_transposed(m, r), (m @ r).T))
        True
    """
    out = np.empty((right.shape[1], mat.shape[0]), dtype=np.result_type(mat.dtype, right.dtype))
    step = max(1, CHUNK_ELEMENTS // max(1, mat.shape[0]))
    for lo in range(0, right.shape[1], step):
        out[lo:lo + step] = (mat @ right[:, lo:lo + step]).T
    return out


def _per_nonzero(S, x, y, dense_ops, out_vars, out_shape, dtype):
    """Gather every dense operand at each nonzero's (x, y), multiply, and sum into the output."""
    check_dense(out_shape, "the result of a sparse product")
    (rows, cols), vals = entries(S)
    others = [v for v in out_vars if v not in (x, y)]
    letters = dict(zip(dict.fromkeys([x, y] + others + [v for _, vs in dense_ops for v in vs]),
                       string.ascii_letters[1:]))
    width = 1
    for arr, vs in dense_ops:
        width = max(width, int(np.prod([arr.shape[vs.index(v)] for v in vs if v not in (x, y)], dtype=np.int64)))
    keep = [v for v in out_vars if v in (x, y)]
    rest_shape = [out_shape[out_vars.index(v)] for v in others]
    acc_shape = [S.shape[0] if v == x else S.shape[1] for v in keep] + rest_shape
    acc = np.zeros(acc_shape, dtype=dtype)
    step = max(1, CHUNK_ELEMENTS // width)
    for lo in range(0, vals.shape[0], step):
        r, c, v = rows[lo:lo + step], cols[lo:lo + step], vals[lo:lo + step]
        at = {x: r, y: c}
        operands, subs = [v], ["a"]
        for arr, vs in dense_ops:
            front = [u for u in vs if u in (x, y)]
            back = [u for u in vs if u not in (x, y)]
            moved = _arrange(arr, vs, tuple(front + back))
            operands.append(moved[tuple(at[u] for u in front)] if front else moved)
            subs.append(("a" if front else "") + "".join(letters[u] for u in back))
        term = np.einsum(",".join(subs) + "->a" + "".join(letters[u] for u in others), *operands)
        if not keep:
            acc += term.sum(axis=0)
        elif len(keep) == 1:
            idx = r if keep[0] == x else c
            scatter = sp.csr_array((np.ones(v.shape[0]), (idx, np.arange(v.shape[0]))),
                                   shape=(acc_shape[0], v.shape[0]))
            acc += (scatter @ term.reshape(v.shape[0], -1)).reshape(acc.shape)
        else:
            first, second = (r, c) if keep[0] == x else (c, r)
            np.add.at(acc, (first, second), term)
    acc_vars = keep + others
    return np.transpose(acc, [acc_vars.index(v) for v in out_vars])
