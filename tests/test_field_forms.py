"""Forms the reference compiler's own test files write, each verified against numpy and run the
same by every simulation mode: a function that returns nothing and writes its results into
arguments through `outs` (tests/mlir/outs_written.mlir), a value the program proves zero
(zero_product.mlir, as in its sparse autoencoder) and constants inside a fused group
(constant_operand.mlir, as in its LayerNorm)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import fuseflow
from fuseflow.cli import main
from fuseflow.ir.canonicalize import prepare
from fuseflow.partition.run import simulate_partitioned
from fuseflow.sim.hw import HwConfig

MLIR = Path(__file__).parent / "mlir"
FORMS = ("outs_written", "zero_product", "constant_operand")


def _dense(x) -> np.ndarray:
    return x.toarray() if hasattr(x, "toarray") else np.asarray(x)


def _program_and_data(name: str):
    program = fuseflow.from_mlir(MLIR / f"{name}.mlir")
    return program, fuseflow.random_inputs(program, density=0.4, seed=5)


def test_what_a_function_writes_through_outs_arguments_is_its_output():
    """X += A·B starts from X's values; the ReLU writing into that result writes into %X again,
    so it is X's final value; exp(A) is written into %Z."""
    program, data = _program_and_data("outs_written")
    assert program.outputs == ["R", "E"]
    result = fuseflow.simulate(program, "full", data)
    assert result.verified
    np.testing.assert_allclose(_dense(result.outputs["R"]), np.maximum(data["X"] + data["A"] @ data["B"], 0),
                               rtol=1e-6)
    np.testing.assert_allclose(_dense(result.outputs["E"]), np.exp(data["A"]), rtol=1e-6)


def test_a_function_writing_through_outs_verifies_on_the_command_line(capsys):
    assert main(["simulate", str(MLIR / "outs_written.mlir"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verified"]


def test_a_value_proved_zero_is_folded_away_and_its_readers_get_zeros():
    """D = W·H with W an unfilled sparse tensor.empty is zero: Y = D + b is b, and the encoder
    computing H, which no output needs any more, is not simulated."""
    program, data = _program_and_data("zero_product")
    assert [str(op) for op in prepare(program).ops] == ["Y(i) = b(i)"]
    result = fuseflow.simulate(program, "full", data)
    assert result.verified and result.flops == 0
    np.testing.assert_array_equal(_dense(result.outputs["Y"]), data["b"])


def test_constants_in_a_fused_group_are_folded_into_the_ops_reading_them():
    """The filled count divides the sum (16.0) and 4.0 * 4.0 is computed once: no op of the
    fused group streams a constant."""
    program, data = _program_and_data("constant_operand")
    ops = [str(op) for op in prepare(program).ops]
    assert "mean(i) = sum(i) / 16" in ops and "var(i) = sq(i) / 16" in ops
    assert not any(op.startswith("count") for op in ops)
    result = fuseflow.simulate(program, "full", data)
    assert result.verified and len(result.kernels) == 1


@pytest.mark.parametrize("schedule", ["full", "unfused"])
@pytest.mark.parametrize("name", [*FORMS, "constant outputs"])
def test_every_simulation_mode_runs_a_form_the_same(name, schedule):
    """Whole run, oracle engine, bounded channels and two shards: verified, the same cycles."""
    if name == "constant outputs":
        program = fuseflow.from_mlir(CONSTANT_OUTPUTS)
        data = fuseflow.random_inputs(program, seed=5)
    else:
        program, data = _program_and_data(name)
    whole = fuseflow.simulate(program, schedule, data)
    oracle = fuseflow.simulate(program, schedule, data, engine="oracle")
    bounded = fuseflow.simulate(program, schedule, data, hw=HwConfig(channel_depth=1024))
    sharded = simulate_partitioned(program, schedule, data, shards=2)
    assert all(r.verified for r in (whole, oracle, bounded, sharded))
    assert whole.cycles == oracle.cycles == bounded.cycles == sharded.cycles


CONSTANT_OUTPUTS = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
#SV = #sparse_tensor.encoding<{ map = (i) -> (i : compressed) }>
func.func @f(%h: tensor<6xf32>) -> (tensor<3x4xf32>, tensor<12xf32, #SV>, tensor<12xf32>) {
  %c = arith.constant 3.0 : f32
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x4xf32>
  %F = linalg.fill ins(%c : f32) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %W = tensor.empty() : tensor<12x6xf32, #CSR>
  %es = tensor.empty() : tensor<12xf32, #SV>
  %zs = linalg.fill ins(%z : f32) outs(%es : tensor<12xf32, #SV>) -> tensor<12xf32, #SV>
  %D = linalg.matvec ins(%W, %h : tensor<12x6xf32, #CSR>, tensor<6xf32>)
                     outs(%zs : tensor<12xf32, #SV>) -> tensor<12xf32, #SV>
  %ed = tensor.empty() : tensor<12xf32>
  %zd = linalg.fill ins(%z : f32) outs(%ed : tensor<12xf32>) -> tensor<12xf32>
  %E = linalg.matvec ins(%W, %h : tensor<12x6xf32, #CSR>, tensor<6xf32>) outs(%zd : tensor<12xf32>) -> tensor<12xf32>
  return %F, %D, %E : tensor<3x4xf32>, tensor<12xf32, #SV>, tensor<12xf32>
}"""


def test_an_output_no_input_determines_is_read_from_a_constant_input():
    """A returned fill, and products with an unfilled sparse tensor.empty returned stored
    compressed and dense: each a copy of an input holding its value in its own format, so the
    compressed zero is an empty stream."""
    program = fuseflow.from_mlir(CONSTANT_OUTPUTS)
    canonical = prepare(program)
    assert [str(op) for op in canonical.ops] == ["F(i,j) = F_value(i,j)", "D(i) = D_value(i)", "E(i) = E_value(i)"]
    assert str(canonical.tensors["D_value"].format) == "compressed"
    result = fuseflow.simulate(program, "unfused")
    assert result.verified
    np.testing.assert_array_equal(_dense(result.outputs["F"]), np.full((3, 4), 3.0))
    np.testing.assert_array_equal(_dense(result.outputs["D"]), np.zeros(12))
    d, e = result.kernels[1], result.kernels[2]
    assert d.mem_writes < e.mem_writes and d.tokens < e.tokens  # nothing stored, against 12 zeros


REDUCED_CONSTANT = """
#a = affine_map<(i, j) -> (i)>
#c = affine_map<(i, j) -> (j)>
func.func @f(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %two = arith.constant 2.0 : f32
  %z = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e5 = tensor.empty() : tensor<5xf32>
  %c = linalg.fill ins(%two : f32) outs(%e5 : tensor<5xf32>) -> tensor<5xf32>
  %e4 = tensor.empty() : tensor<4xf32>
  %zero = linalg.fill ins(%z : f32) outs(%e4 : tensor<4xf32>) -> tensor<4xf32>
  %low = linalg.fill ins(%ninf : f32) outs(%e4 : tensor<4xf32>) -> tensor<4xf32>
  %s = linalg.generic {indexing_maps = [#a, #c, #a], iterator_types = ["parallel", "reduction"]}
      ins(%a, %c : tensor<4xf32>, tensor<5xf32>) outs(%zero : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %p, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %m = linalg.generic {indexing_maps = [#a, #c, #a], iterator_types = ["parallel", "reduction"]}
      ins(%a, %c : tensor<4xf32>, tensor<5xf32>) outs(%low : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.addf %x, %y : f32
    %r = arith.maximumf %p, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %s, %m : tensor<4xf32>, tensor<4xf32>
}"""


def test_a_reduction_over_a_folded_constant_sums_or_takes_its_body_along_the_variable():
    """sum[j] a(i) * c(j) with c filled with 2 over 5 coordinates is a(i) * 2 * 5; max[j] of
    a(i) + 2 is a(i) + 2."""
    program = fuseflow.from_mlir(REDUCED_CONSTANT)
    assert [str(op) for op in prepare(program).ops] == ["s(i) = a(i) * 2 * 5", "m(i) = a(i) + 2"]
    data = fuseflow.random_inputs(program, seed=1)
    result = fuseflow.simulate(program, "full", data)
    assert result.verified
    np.testing.assert_allclose(_dense(result.outputs["s"]), data["a"] * 10, rtol=1e-6)
    np.testing.assert_allclose(_dense(result.outputs["m"]), data["a"] + 2, rtol=1e-6)
