"""Minimal programs for what the random-program fuzzer found (the size-1 class is in
tests/test_unit_dims.py), each checked against numpy written here, and honest checks: nothing to
compare is said, not reported as verified."""
import numpy as np
import pytest

import fuseflow
from fuseflow.cli import main
from fuseflow.errors import UserError
from fuseflow.pipeline import simulate

from fuzz_programs import RandomProgram, Step, Value


def test_a_fused_transpose_of_blocked_values():
    """t1 = exp(a)ᵀ fused with block=2: the copy reorders its tile's axes (an ALU times 1 whose
    output tile is transposed), where it used to be refused."""
    a, t0, t1 = Value("a0", (4, 4)), Value("t0", (4, 4)), Value("t1", (4, 4))
    p = RandomProgram([a], [Step("exp", (a,), t0), Step("transpose", (t0,), t1)], [t1])
    program = fuseflow.from_mlir(p.mlir())
    data = p.data(0)
    for schedule in ("full block=2", "full block=2 order=j,i"):
        result = simulate(program, schedule, data)
        assert result.verified and np.allclose(result.outputs["t1"], np.exp(data["a0"]).T), schedule


NOTHING_RETURNED = """
func.func @f(%a: tensor<3xf32>, %out: tensor<3xf32>) {
  %r = linalg.exp ins(%a : tensor<3xf32>) outs(%out : tensor<3xf32>) -> tensor<3xf32>
  return
}"""


def test_a_function_returning_nothing_has_nothing_to_compare(tmp_path, capsys):
    """Writing only through an argument (tensors are values: the result is dropped) leaves
    nothing to simulate or compare: one line and exit 2, never `verified`."""
    program = fuseflow.from_mlir(NOTHING_RETURNED)
    with pytest.raises(UserError, match="returns no tensor, so there is nothing to compare"):
        simulate(program, "full")
    path = tmp_path / "none.mlir"
    path.write_text(NOTHING_RETURNED)
    assert main(["simulate", str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing to compare" in err
