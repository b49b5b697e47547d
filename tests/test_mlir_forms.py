"""The field's MLIR as it is written: unfilled tensor.empty() read as zeros (a note on stderr for a
dense one, refused by --strict), one size for every dynamic dimension (`--shape '?=N'`, or a
default said on stderr), inputs known by their argument names in any declared order, and
integer tensors; outputs against numpy (the programs' checks are in test_mlir_frontend.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import error_of

import fuseflow
from fuseflow.checks import dynamic_shapes
from fuseflow.cli import main

MLIR = Path(__file__).parent / "mlir"


def _json_run(argv, capsys) -> tuple[dict, str]:
    assert main(argv + ["--json"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


def test_an_unfilled_empty_is_zeros_with_one_note_and_refused_when_strict(capsys):
    path = str(MLIR / "empty_init.mlir")
    result, err = _json_run(["simulate", path, "--schedule", "unfused"], capsys)
    assert result["verified"]
    notes = [line for line in err.splitlines() if "note:" in line]
    assert len(notes) == 1 and "read as zeros" in notes[0] and "--strict" in notes[0]
    line = error_of(["simulate", path, "--strict"], capsys)
    assert "uninitialised tensor.empty" in line and "empty_init.mlir:7:" in line


SPARSE_EMPTY = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @f(%A: tensor<8x6xf32, #CSR>, %X: tensor<6x5xf32>) -> tensor<8x5xf32, #CSR> {
  %e = tensor.empty() : tensor<8x5xf32, #CSR>
  %Y = linalg.matmul ins(%A, %X : tensor<8x6xf32, #CSR>, tensor<6x5xf32>)
                     outs(%e : tensor<8x5xf32, #CSR>) -> tensor<8x5xf32, #CSR>
  return %Y : tensor<8x5xf32, #CSR>
}"""


def test_a_sparse_encoded_empty_is_zeros_without_a_note_even_when_strict(capsys):
    program = fuseflow.from_mlir(SPARSE_EMPTY, strict=True)
    assert "note" not in capsys.readouterr().err
    data = fuseflow.random_inputs(program, density=0.3, seed=2)
    got = fuseflow.simulate(program, "unfused", data).outputs["Y"]
    np.testing.assert_allclose(got.toarray() if hasattr(got, "toarray") else np.asarray(got), data["A"] @ data["X"],
                               rtol=1e-6)


@pytest.mark.parametrize(("flags", "rows"), [([], 16), (["--shape", "?=32"], 32), (["--shape", "A=7x8"], 7)])
def test_dynamic_dimensions_take_one_size_or_a_default(flags, rows, capsys):
    result, err = _json_run(["simulate", str(MLIR / "dynamic.mlir"), "--schedule", "unfused", *flags], capsys)
    assert result["verified"]
    assert ("dynamic dimensions of A are 16" in err) == (not flags)
    assert result["shapes"]["A"] == [rows, 8] if "shapes" in result else result["verified"]


def test_one_size_for_every_dynamic_dimension_in_python():
    program = fuseflow.from_mlir(MLIR / "dynamic.mlir")
    data = fuseflow.random_inputs(program, shapes=dynamic_shapes(program, {"?": 5}, {}))
    assert data["A"].shape == (5, 8)


def test_inputs_are_known_by_their_argument_names_in_any_order(tmp_path, capsys):
    program = fuseflow.from_mlir(MLIR / "args_out_of_order.mlir")
    assert program.inputs == ["arg2", "arg0", "arg1"]
    rng = np.random.default_rng(0)
    data = {"arg0": rng.normal(size=(4, 3)), "arg1": rng.normal(size=3), "arg2": rng.normal(size=(6, 4))}
    result = fuseflow.simulate(program, "full", data)
    np.testing.assert_allclose(np.asarray(result.outputs["y"]), data["arg2"] @ data["arg0"] + data["arg1"], rtol=1e-9)
    np.savez(tmp_path / "in.npz", **data)
    out, _ = _json_run(["simulate", str(MLIR / "args_out_of_order.mlir"), "--inputs", str(tmp_path / "in.npz")],
                       capsys)
    assert out["verified"]


def test_integer_tensors_and_exact_casts():
    program = fuseflow.from_mlir(MLIR / "integers.mlir")
    N = np.arange(-15, 15).reshape(6, 5)
    X = np.linspace(-1, 1, 30).reshape(6, 5)
    for schedule in ("unfused", "full"):
        result = fuseflow.simulate(program, schedule, {"N": N, "X": X})
        np.testing.assert_allclose(np.asarray(result.outputs["Y"]), N * X, rtol=1e-12)
        np.testing.assert_array_equal(np.asarray(result.outputs["T"]), N * 3 + 1)
    assert np.all(fuseflow.random_inputs(program)["N"] % 1 == 0)


def test_a_cast_to_integer_of_a_fraction_is_refused():
    text = (MLIR / "integers.mlir").read_text().replace("%g = arith.mulf %f, %three : f32",
                                                         "%g = arith.divf %f, %three : f32")
    with pytest.raises(fuseflow.NotSupported, match="arith.fptosi of a value that may have a fraction"):
        fuseflow.from_mlir(text)
