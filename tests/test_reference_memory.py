"""The reference's memory: an elementwise op writes its result over an operand it reads last
(nobody else holding it), so a chain of such ops (GCN's softmax, GraphSAGE's bias-add-ReLU) holds
one array instead of two; the values stay bit-identical."""
from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import fuseflow
from fuseflow.ir import sparse_eval
from fuseflow.ir.expr import Binary, In
from fuseflow.ir.program import Access, IndexOp
from fuseflow.ir.reference import ReferenceRun, reference

from lowering_cases import MLIR_FILES, fix_data, load


@pytest.mark.parametrize("path", MLIR_FILES, ids=[os.path.basename(p) for p in MLIR_FILES])
def test_in_place_results_are_bit_identical(path):
    """Outputs computed in place equal those of a run keeping every intermediate (never in place)."""
    program, shapes = load(path)
    data = fix_data(path, fuseflow.random_inputs(program, density=0.3, seed=7, shapes=shapes))
    lean = reference(program, data)
    kept = reference(program, data, keep_intermediates=True)
    for name in program.outputs:
        assert np.array_equal(np.asarray(lean[name]), np.asarray(kept[name]), equal_nan=True), name


def _relu_run(check=None):
    program = fuseflow.from_mlir("tests/mlir/relu.mlir")  # AX = A @ X; H = relu(AX + b)
    return program, ReferenceRun(program, fuseflow.random_inputs(program, density=0.3, seed=3), check=check)


def test_an_elementwise_op_takes_the_memory_of_the_operand_it_reads_last():
    """H = relu(AX + b) is written over AX (read by nothing after it): one array, not two; the
    budget is asked only for a piece's temporaries, and the inputs are never written over."""
    seen = {}

    def check(nbytes, what):
        if "AX" in run.env:
            seen["AX"] = run.env["AX"]

    program, run = _relu_run(check)
    x_before = run.env["X"].copy()
    h = run.values(["H"])["H"]
    assert np.shares_memory(h, seen["AX"]) and "AX" not in run.held()
    assert np.array_equal(run.env["X"], x_before)


def test_a_kept_operand_is_not_written_over():
    """An operand the caller asked for (or was given) keeps its values; the result is a new array."""
    program, run = _relu_run()
    ax = run.values(["AX"])["AX"]
    before = ax.copy()
    h = run.values(["H"])["H"]
    assert not np.shares_memory(h, ax) and np.array_equal(ax, before)
    assert np.array_equal(h, reference(program, {n: run.env[n] for n in program.inputs})["H"])


def test_a_product_with_a_sparse_matrix_read_transposed_holds_one_result(monkeypatch):
    """Y(i,j) = sum_k D(i,k) W(j,k) with W sparse (a linear layer's weight): the result is made
    in its own order, never as W @ D.T and then a transposed copy (a GraphSAGE layer over the MAG
    twin: 2 GB each), and equals that product bit for bit."""
    monkeypatch.setattr(sparse_eval, "CHUNK_ELEMENTS", 1 << 18)  # pieces of 1/20 of the result
    rng = np.random.default_rng(0)
    d, w = rng.standard_normal((20000, 8)), sp.random_array((300, 8), density=0.6, random_state=2, format="csr")
    op = IndexOp(Access("Y", ("i", "j")), (Access("D", ("i", "k")), Access("W", ("j", "k"))),
                 Binary("mul", In(0), In(1)), reduce_vars=("k",), reduce_kind="sum")
    tracemalloc.start()
    try:
        y = sparse_eval.evaluate(op, {"D": d, "W": w}, (20000, 300))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert y.flags.c_contiguous and peak < 1.25 * y.nbytes, (peak, y.nbytes)
    assert np.array_equal(y, np.ascontiguousarray((w @ d.T).T))
