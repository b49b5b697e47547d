"""The reference evaluator keeps large sparse operands sparse and gets what the dense path gets;
storage encodes them without a dense array; statistics read them as they are."""
from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import fuseflow
from fuseflow.ir import sparse_eval
from fuseflow.ir.expr import Binary, Const, In
from fuseflow.ir.formats import TensorFormat
from fuseflow.ir.program import Access, IndexOp
from fuseflow.ir.reference import reference
from fuseflow.ir.stats import DataStats
from fuseflow.ir.values import as_value, densify, is_sparse
from fuseflow.sim.storage import StoredTensor

from lowering_cases import MLIR_FILES, fix_data, load


def _sparse_inputs(program, data):
    """Every 2-D input stored with a compressed level, as a scipy sparse matrix."""
    out = {}
    for name, value in data.items():
        fmt = program.tensors[name].format
        if np.ndim(value) == 2 and any(lv.is_compressed for lv in fmt.levels):
            out[name] = sp.csr_array(value)
        else:
            out[name] = value
    return out


@pytest.mark.parametrize("path", MLIR_FILES, ids=[os.path.basename(p) for p in MLIR_FILES])
def test_sparse_paths_agree_with_the_dense_reference(path):
    program, shapes = load(path)
    data = fix_data(path, fuseflow.random_inputs(program, density=0.3, seed=5, shapes=shapes))
    want = reference(program, data)
    got = reference(program, _sparse_inputs(program, data), dense_limit=0)
    for name in program.outputs:
        assert np.allclose(densify(got[name]), want[name], rtol=1e-12, atol=1e-12, equal_nan=True), name


def _op(out, ins, body, reduce=()):
    return IndexOp(Access("Y", out), tuple(Access(t, v) for t, v in ins), body, reduce_vars=reduce,
                   reduce_kind="sum" if reduce else None)


MUL2 = Binary("mul", In(0), In(1))
MUL3 = Binary("mul", Binary("mul", In(0), In(1)), In(2))


@pytest.mark.parametrize("out, ins, body, reduce", [
    (("i", "j"), [("S", ("i", "k")), ("D", ("k", "j"))], MUL2, ("k",)),             # SpMM
    (("j", "i"), [("S", ("i", "k")), ("D", ("j", "k"))], MUL2, ("k",)),             # transposed operands
    (("k", "j"), [("S", ("i", "k")), ("D", ("i", "j"))], MUL2, ("i",)),             # S^T D
    (("i",), [("S", ("i", "k")), ("v", ("k",))], MUL2, ("k",)),                     # SpMV
    (("i", "k"), [("S", ("i", "k")), ("E", ("i", "k"))], MUL2, ()),                 # masked (pattern kept)
    (("k", "i"), [("S", ("i", "k")), ("v", ("k",))], Binary("mul", MUL2, Const(3.0)), ()),
    (("i",), [("S", ("i", "k")), ("v", ("k",)), ("w", ("i",))], MUL3, ("k",)),      # scaled rows
    (("i", "j"), [("S", ("i", "k")), ("Q", ("i", "j")), ("D", ("k", "j"))], MUL3, ("k",)),  # per nonzero
    (("j",), [("S", ("i", "k")), ("Q", ("i", "j")), ("D", ("k", "j"))], MUL3, ("i", "k")),
    (("i", "k", "j"), [("S", ("i", "k")), ("D", ("k", "j"))], MUL2, ()),            # a dense 3-D result
    (("i", "j"), [("S", ("i", "k")), ("T", ("k", "j"))], MUL2, ("k",)),             # SpGEMM
    (("i", "k"), [("S", ("i", "k")), ("U", ("i", "k"))], MUL2, ()),                 # sparse x sparse
])
def test_sparse_products_equal_dense_einsum(out, ins, body, reduce):
    rng = np.random.default_rng(1)
    dims = {"i": 7, "k": 5, "j": 3}
    dense = {name: rng.normal(size=[dims[v] for v in vs]) for name, vs in ins}
    for name in ("S", "T", "U"):
        if name in dense:
            dense[name] *= rng.random(dense[name].shape) < 0.4
    op = _op(out, ins, body, reduce)
    env = {name: sp.csr_array(a) if name in ("S", "T", "U") else a for name, a in dense.items()}
    letters = {v: chr(97 + n) for n, v in enumerate("ikj")}
    spec = ",".join("".join(letters[v] for v in vs) for _, vs in ins) + "->" + "".join(letters[v] for v in out)
    want = np.einsum(spec, *[dense[name] for name, _ in ins])
    if isinstance(body, Binary) and isinstance(body.rhs, Const):
        want = want * body.rhs.value
    got = sparse_eval.evaluate(op, env, tuple(dims[v] for v in out))
    assert got is not None
    assert np.allclose(densify(got), want, rtol=1e-12, atol=1e-12)


def test_a_large_graph_product_costs_its_edges_not_its_nodes_squared():
    """A 200,000-node graph (1M edges) times 16 features: a dense adjacency would be 320 GB."""
    n, f = 200_000, 16
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(0, n, 1_000_000), rng.integers(0, n, 1_000_000)
    A = sp.csr_array((np.ones(rows.shape[0]), (rows, cols)), shape=(n, n))
    X = rng.normal(size=(n, f))
    program = fuseflow.from_mlir(f"""
#CSR = #sparse_tensor.encoding<{{ map = (i, j) -> (i : dense, j : compressed) }}>
func.func @spmm(%A: tensor<{n}x{n}xf32, #CSR>, %X: tensor<{n}x{f}xf32>) -> tensor<{n}x{f}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{n}x{f}xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<{n}x{f}xf32>) -> tensor<{n}x{f}xf32>
  %y = linalg.matmul ins(%A, %X : tensor<{n}x{n}xf32, #CSR>, tensor<{n}x{f}xf32>)
                     outs(%i : tensor<{n}x{f}xf32>) -> tensor<{n}x{f}xf32>
  return %y : tensor<{n}x{f}xf32>
}}""")
    tracemalloc.start()
    got = reference(program, {"A": A, "X": X})["y"]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert np.allclose(got, A @ X)
    assert peak < 200e6, f"the reference took {peak / 1e6:.0f} MB"


def assert_same_storage(a, b, where, signs=False):
    """Two StoredTensors hold the same levels and values (NaN too; with `signs`, negative zeros)."""
    for la, lb in zip(a.levels, b.levels, strict=True):
        assert la.format == lb.format and la.dim == lb.dim, where
        if la.is_compressed:
            assert la.seg.tolist() == lb.seg.tolist() and la.crd.tolist() == lb.crd.tolist(), where
    assert a.vals.shape == b.vals.shape and np.array_equal(a.vals, b.vals, equal_nan=True), where
    assert not signs or np.array_equal(np.signbit(a.vals), np.signbit(b.vals)), where


def test_stored_tensor_from_a_sparse_matrix_equals_from_the_dense_one():
    rng = np.random.default_rng(3)
    dense = rng.normal(size=(9, 8)) * (rng.random((9, 8)) < 0.3)
    dense[4] = 0.0  # an empty row
    sparse = sp.csr_array(dense)
    for text in ("dense,compressed", "compressed,compressed", "compressed,compressed;order=1,0",
                 "dense,compressed;order=1,0", "compressed,dense", "dense,dense",
                 "dense,compressed;block=3x2", "compressed,compressed;block=3x4;order=1,0"):
        fmt = TensorFormat.parse(text)
        a, b = StoredTensor.from_dense(dense, fmt), StoredTensor.from_value(sparse, fmt)
        assert_same_storage(a, b, text)
        assert np.array_equal(b.to_dense(), dense), text


def test_stored_tensor_from_untidy_scipy_matrices_equals_from_the_dense_one():
    """Duplicates, explicit zeros, CSC and COO inputs and an all-empty matrix store as the dense
    array they describe."""
    rng = np.random.default_rng(5)
    dense = rng.normal(size=(7, 6)) * (rng.random((7, 6)) < 0.4)
    dense[:, 2] = 0.0
    r, c = np.nonzero(dense)
    untidy = sp.coo_array((np.concatenate([dense[r, c] / 2, dense[r, c] / 2, [0.0]]),
                           (np.concatenate([r, r, [0]]), np.concatenate([c, c, [2]]))), shape=dense.shape)
    values = [untidy, untidy.tocsr(), sp.csc_array(dense), sp.csr_array((7, 6))]
    for value in values:
        want = value.toarray()
        for text in ("dense,compressed", "compressed,compressed", "compressed,compressed;order=1,0",
                     "dense,compressed;order=1,0"):
            fmt = TensorFormat.parse(text)
            assert_same_storage(StoredTensor.from_dense(want, fmt), StoredTensor.from_value(value, fmt), text)
    assert np.array_equal(untidy.toarray(), dense)  # the duplicates and the zero were not folded in place


def test_stored_tensor_from_a_dense_value_equals_from_dense_in_every_layout():
    """from_value's shortcuts (all levels dense; a compressed inner level) store what from_dense
    does, with negative zeros, NaN and a background other than 0."""
    rng = np.random.default_rng(8)
    dense = rng.normal(size=(6, 5)) * (rng.random((6, 5)) < 0.5)
    dense[0, 0], dense[1, 1], dense[2] = -0.0, np.nan, 0.0
    cases = [(dense, text, fill) for text in ("dense,dense", "dense,dense;order=1,0", "dense,compressed",
                                              "compressed,compressed;order=1,0", "compressed,dense")
             for fill in (0.0, -np.inf)] + [(np.float64(2.5), "", 0.0), (rng.normal(size=(2, 3, 4)),
                                                                         "dense,dense,dense;order=2,0,1", 0.0)]
    for value, text, fill in cases:
        fmt = TensorFormat.parse(text) if text else TensorFormat((), (), None)
        a, b = StoredTensor.from_dense(value, fmt, fill), StoredTensor.from_value(value, fmt, fill)
        assert_same_storage(a, b, text, signs=True)


def test_the_guards_storage_estimate_covers_what_storing_allocates():
    """storage_bytes (what the memory guard asks for before a kernel stores its inputs) is at
    least the peak that storing allocates, and not far above it."""
    import tracemalloc

    from fuseflow.sim.storage import storage_bytes

    rng = np.random.default_rng(9)
    A = sp.random_array((3000, 2000), density=0.02, format="csr", rng=rng)
    X = rng.normal(size=(600, 500))
    for value, text in ((A, "dense,compressed"), (A, "compressed,compressed;order=1,0"),
                        (A, "dense,compressed;block=4x4"), (X, "dense,dense"), (X, "dense,dense;order=1,0"),
                        (X, "dense,compressed"), (X, "compressed,compressed;order=1,0")):
        fmt = TensorFormat.parse(text)
        tracemalloc.start()
        StoredTensor.from_value(value, fmt)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak <= storage_bytes(value, fmt) <= 12 * peak + (8 << 20), (text, peak, storage_bytes(value, fmt))


def test_storing_a_sparse_matrix_takes_a_few_bytes_an_entry():
    import tracemalloc

    A = sp.random_array((20_000, 5_000), density=0.01, format="csr", rng=np.random.default_rng(6))
    A.sort_indices()
    for text in ("dense,compressed", "compressed,compressed;order=1,0"):
        tracemalloc.start()
        StoredTensor.from_value(A, TensorFormat.parse(text))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 40 * A.nnz, f"{text}: {peak / A.nnz:.0f} bytes an entry"


def test_statistics_of_sparse_and_dense_inputs_agree():
    rng = np.random.default_rng(4)
    dense = rng.normal(size=(30, 20)) * (rng.random((30, 20)) < 0.1)
    for text in ("dense,compressed", "compressed,compressed", "compressed,compressed;order=1,0"):
        fmt = TensorFormat.parse(text)
        assert DataStats({"A": sp.csr_array(dense)}).level_densities("A", fmt) == \
            DataStats({"A": dense}).level_densities("A", fmt), text
    assert DataStats({"A": sp.csr_array(dense)}).density("A") == DataStats({"A": dense}).density("A")


def test_statistics_of_untidy_scipy_matrices_agree_with_the_dense_array():
    """Duplicates, explicit zeros (a row and a column holding only one), CSC and COO inputs and
    an all-empty matrix: the levels' statistics count the nonzeros the dense array holds."""
    rng = np.random.default_rng(6)
    dense = rng.normal(size=(9, 8)) * (rng.random((9, 8)) < 0.3)
    dense[:, 2] = dense[4, :] = 0.0
    r, c = np.nonzero(dense)
    untidy = sp.coo_array((np.concatenate([dense[r, c] / 2, dense[r, c] / 2, [0.0, 0.0]]),
                           (np.concatenate([r, r, [4, 0]]), np.concatenate([c, c, [1, 2]]))), shape=dense.shape)
    for value in (untidy, untidy.tocsr(), sp.csc_array(dense), sp.csr_array((9, 8))):
        for mode_order in ((0, 1), (1, 0)):
            assert DataStats({"A": value.copy()}).nonempty_prefixes("A", mode_order) == \
                DataStats({"A": value.toarray()}).nonempty_prefixes("A", mode_order), (type(value), mode_order)


def test_values_stay_sparse_only_when_large():
    small = sp.random(10, 10, density=0.2, random_state=0)
    assert not is_sparse(as_value(small))
    assert is_sparse(as_value(small, dense_limit=50))


def test_a_written_matrix_decodes_to_the_matrix_in_every_layout():
    from fuseflow.execute import _decode_sparse
    from fuseflow.sim.storage import WrittenTensor

    rng = np.random.default_rng(7)
    dense = rng.normal(size=(9, 7)) * (rng.random((9, 7)) < 0.3)
    dense[3], dense[:, 5] = 0.0, 0.0
    for text in ("dense,compressed", "compressed,compressed", "compressed,compressed;order=1,0",
                 "dense,compressed;order=1,0", "compressed,dense", "dense,dense;order=1,0"):
        fmt = TensorFormat.parse(text)
        stored = StoredTensor.from_dense(dense, fmt)
        vals = stored.vals.copy()
        vals[:1] = 0.0  # an explicit zero a kernel wrote is no entry of the matrix
        before = [lv.crd.copy() for lv in stored.levels if lv.is_compressed], vals.copy()
        got = _decode_sparse(WrittenTensor(dict(enumerate(stored.levels)), vals), dense.shape, tuple(fmt.mode_order))
        assert all(np.array_equal(a, lv.crd) for a, lv in zip(before[0], [lv for lv in stored.levels
                                                                         if lv.is_compressed])), text
        assert np.array_equal(before[1], vals), f"{text}: decoding changed what the kernel wrote"
        assert got.format == "csr" and got.has_canonical_format, text
        assert np.array_equal(got.toarray(), StoredTensor(stored.levels, vals, dense.shape, fmt).to_dense()), text
        assert np.all(got.data != 0), text
