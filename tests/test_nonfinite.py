"""One meaning for non-finite values: a position a sparse operand does not store contributes an
exact zero to a product (MLIR's sparsifier, torch.sparse), in the reference and the simulator
alike, under every preset; a self-check mismatch is a bug (exit 3)."""
from __future__ import annotations

import importlib
import os

import numpy as np
import pytest
import scipy.sparse as sp
from cli_helpers import error_of

import fuseflow
from fuseflow import pipeline
from fuseflow.cli import main
from fuseflow.ir.reference import reference

HERE = os.path.dirname(__file__)
NONFINITE = os.path.join(HERE, "mlir", "nonfinite.mlir")

SPGEMM = """
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
func.func @spgemm(%A: tensor<60x50xf32, #DCSR>, %B: tensor<50x40xf32, #DCSR>) -> tensor<60x40xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<60x40xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<60x40xf32>) -> tensor<60x40xf32>
  %Y = linalg.matmul ins(%A, %B : tensor<60x50xf32, #DCSR>, tensor<50x40xf32, #DCSR>)
                     outs(%f : tensor<60x40xf32>) -> tensor<60x40xf32>
  return %Y : tensor<60x40xf32>
}
"""


def _sparse_semantics(data):
    """The outputs of nonfinite.mlir by scipy: only A's stored entries take part in the products."""
    A = sp.csr_array(data["A"])
    with np.errstate(all="ignore"):
        T = data["X"] / 0.0
        E = np.exp(10000.0 * data["X"])
        return {"AT": A @ T, "AE": A @ E, "S": A.multiply(T).toarray()}


@pytest.mark.parametrize("schedule", ["unfused", "partial", "full"])
def test_non_finite_intermediates_agree_under_every_preset(schedule):
    program = fuseflow.from_mlir(NONFINITE)
    data = fuseflow.random_inputs(program, density=0.15, seed=3)
    want = _sparse_semantics(data)
    assert np.isnan(want["AT"]).any() and np.isinf(want["AE"]).any()  # the case is not vacuous
    assert np.isfinite(want["AT"]).any()  # rows where A stores nothing: exact zeros
    result = fuseflow.simulate(program, schedule, data)
    assert result.verified
    for name in ("AT", "AE", "S"):
        np.testing.assert_allclose(np.asarray(result.outputs[name]), want[name], rtol=1e-6)
        np.testing.assert_allclose(reference(program, data)[name], want[name], rtol=1e-6)


def test_a_sparse_product_into_a_dense_output_stays_sparse(monkeypatch):
    program = fuseflow.from_mlir(SPGEMM)
    data = fuseflow.random_inputs(program, density=0.05, seed=1)

    def dense_path(*args):
        raise AssertionError("the sparse x sparse product went through the dense path")

    monkeypatch.setattr(importlib.import_module("fuseflow.ir.reference"), "_evaluate_dense", dense_path)
    got = reference(program, data)["Y"]
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, data["A"] @ data["B"], rtol=1e-12)


def test_a_self_check_mismatch_exits_3_with_the_report_line(monkeypatch, capsys):
    def wrong(program, tensors):
        return {name: value + 1.0 for name, value in reference(program, tensors).items()}

    monkeypatch.setattr(pipeline, "reference", wrong)
    code = main(["simulate", os.path.join(HERE, "mlir", "spmv.mlir"), "--schedule", "unfused"])
    err = capsys.readouterr().err
    assert code == 3, err
    errors = [line for line in err.splitlines() if ": error: " in line]  # (a first run also notes numba)
    assert len(errors) == 1 and "differs from the reference at" in errors[0] and "please report" in errors[0]


def test_an_empty_schedule_is_refused(capsys):
    assert "the schedule is empty" in error_of(["simulate", os.path.join(HERE, "mlir", "spmv.mlir"),
                                                "--schedule", ""], capsys)


def test_a_refused_sweep_leaves_no_database(tmp_path, capsys):
    db = tmp_path / "s.db"
    line = error_of(["sweep", os.path.join(HERE, "mlir", "spmv.mlir"), "-g", "full bogus=1", "--db", str(db)],
                    capsys)
    assert "bogus" in line
    assert not list(tmp_path.iterdir())


def test_a_mismatch_in_a_study_exits_3(monkeypatch, capsys):
    calls = []

    def wrong_after_the_first(program, tensors):
        calls.append(1)
        gold = reference(program, tensors)
        return gold if len(calls) == 1 else {name: value + 1.0 for name, value in gold.items()}

    monkeypatch.setattr(pipeline, "reference", wrong_after_the_first)
    code = main(["study", "fusion", os.path.join(HERE, "mlir", "spmv.mlir"), "--schedules", "unfused,full"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "differs from the reference at" in err


@pytest.mark.parametrize("extra", [[], ["--sample", "0.5"]])
def test_a_fully_masked_softmax_row_is_undefined_data_not_a_bug(extra, capsys):
    """Issue #40: a masked softmax row whose every entry is masked is 0/0 (exp(-inf - -inf)): NaN
    in the reference and PyTorch, 0 in the sparse graph, which takes values to be finite. The
    program's result is undefined on such data: one line naming the row and the op, exit 2."""
    softmax = os.path.join(HERE, "mlir", "masked_softmax.mlir")
    line = error_of(["simulate", softmax, "--seed", "2", "--density", "0.3", *extra], capsys)
    assert "masked_softmax.mlir:26:9: the program's result is undefined in row 3 of out" in line
    assert "exp(filled(i,j) - max(i)) is NaN at (3, 0) from filled = -inf and max = -inf" in line
    program = fuseflow.from_mlir(softmax)
    data = fuseflow.random_inputs(program, density=0.3, seed=2)
    assert np.isnan(reference(program, data)["out"][3]).all() and not data["M"][3].any()
    data["M"][3, 0] = 1.0  # one unmasked entry: defined, and verified
    assert fuseflow.simulate(program, "full", data).verified
