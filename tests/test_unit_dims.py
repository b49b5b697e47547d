"""Size-1 dimensions: sparse inputs with a unit dimension, broadcasts of unit dimensions and
all-unit ops, each simulated unfused, fully fused and fully fused with induced layouts and
checked against numpy computed here (issue #18's cases)."""
import numpy as np
import pytest

import fuseflow
from fuseflow.fusion.compile import compile_schedule
from fuseflow.ir.formats import TensorFormat
from fuseflow.pipeline import simulate

ENCODINGS = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#CSC = #sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed) }>
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row0 = affine_map<(d0, d1) -> (0, d1)>
"""
SCHEDULES = ("unfused", "full", "full layout=induced")


def elementwise(name: str, types: list[str], out: str, body: str) -> str:
    """A function applying `body` (over block arguments %x0, %x1, ...) to its arguments."""
    args = ", ".join(f"%a{k}: {t}" for k, t in enumerate(types))
    ins = ", ".join(f"%a{k}" for k in range(len(types)))
    block = ", ".join(f"%x{k}: f32" for k in range(len(types)))
    maps = ", ".join(["#id"] * (len(types) + 1))
    return ENCODINGS + f"""
func.func @{name}({args}) -> {out} {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {out}
  %r = linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel", "parallel"]}}
      ins({ins} : {", ".join(types)}) outs(%e : {out}) {{
  ^bb0({block}, %o: f32):
    {body}
  }} -> {out}
  return %r : {out}
}}"""


def check(text: str, data: dict, want: np.ndarray):
    program = fuseflow.from_mlir(text)
    for schedule in SCHEDULES:
        result = simulate(program, schedule, data)
        assert result.verified, schedule
        assert np.allclose(result.outputs[program.outputs[0]], want), schedule


def test_copy_of_a_csr_column():
    a = np.array([[1.0], [0.0], [2.0]])
    check(elementwise("copy", ["tensor<3x1xf32, #CSR>"], "tensor<3x1xf32>", "linalg.yield %x0 : f32"), {"a0": a}, a)


def test_product_of_csr_and_csc_rows():
    """A = [1,0,0,0] (CSR), B = [0,0,5,0] (CSC): the product is 0 everywhere."""
    a, b = np.array([[1.0, 0, 0, 0]]), np.array([[0, 0, 5.0, 0]])
    text = elementwise("mul", ["tensor<1x4xf32, #CSR>", "tensor<1x4xf32, #CSC>"], "tensor<1x4xf32>",
                       "%m = arith.mulf %x0, %x1 : f32\n    linalg.yield %m : f32")
    check(text, {"a0": a, "a1": b}, a * b)


def test_dense_row_times_csc_row():
    a, b = np.array([[1.0, 2, 0, 3]]), np.array([[0, 4, 5.0, 1]])
    text = elementwise("mul", ["tensor<1x4xf32>", "tensor<1x4xf32, #CSC>"], "tensor<1x4xf32>",
                       "%m = arith.mulf %x0, %x1 : f32\n    linalg.yield %m : f32")
    check(text, {"a0": a, "a1": b}, a * b)


def test_relu_of_dcsr_row_times_csc_row():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(1, 8)) * (rng.random((1, 8)) < 0.5)
    b = rng.normal(size=(1, 8)) * (rng.random((1, 8)) < 0.5)
    text = elementwise("relu", ["tensor<1x8xf32, #DCSR>", "tensor<1x8xf32, #CSC>"], "tensor<1x8xf32>",
                       "%m = arith.mulf %x0, %x1 : f32\n    %r = arith.maximumf %m, %zero : f32\n"
                       "    linalg.yield %r : f32")
    check(text, {"a0": a, "a1": b}, np.maximum(a * b, 0))


def test_transpose_of_a_csr_column():
    a = np.array([[1.0], [0.0], [2.0]])
    text = ENCODINGS + """
func.func @t(%a: tensor<3x1xf32, #CSR>) -> tensor<1x3xf32> {
  %e = tensor.empty() : tensor<1x3xf32>
  %t = linalg.transpose ins(%a : tensor<3x1xf32, #CSR>) outs(%e : tensor<1x3xf32>) permutation = [1, 0]
  return %t : tensor<1x3xf32>
}"""
    check(text, {"a": a}, a.T)


@pytest.mark.parametrize("row", [[3.0, 0.0], [-3.0, 0.0], [0.0, -1.0]])
def test_row_broadcast_then_column_max(row):
    """b(i,j) = a(0,j) over three rows, then the max of each column: a's row again. Inlining the
    broadcast would leave the max's variable i indexed by nothing, so the copy stays."""
    a = np.array([row])
    text = ENCODINGS + """
func.func @b(%a: tensor<1x2xf32, #CSR>) -> tensor<2xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<3x2xf32>
  %b = linalg.generic {indexing_maps = [#row0, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<1x2xf32, #CSR>) outs(%e : tensor<3x2xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<3x2xf32>
  %e2 = tensor.empty() : tensor<2xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e2 : tensor<2xf32>) -> tensor<2xf32>
  %m = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
      ins(%b : tensor<3x2xf32>) outs(%f : tensor<2xf32>) {
  ^bb0(%x: f32, %o: f32):
    %q = arith.maximumf %x, %o : f32
    linalg.yield %q : f32
  } -> tensor<2xf32>
  return %m : tensor<2xf32>
}"""
    check(text, {"a": a}, a[0])


def test_all_unit_relu_feeding_a_matmul():
    """r = relu(a) of a 1x1 a has no index variable left: fused, it is computed once before the
    matmul's loop (its `last` variable is none)."""
    a, w = np.array([[2.0]]), np.array([[1.0, 2, 3, 4]])
    text = ENCODINGS + """
func.func @f(%a: tensor<1x1xf32>, %w: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x1xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<1x1xf32>) outs(%e : tensor<1x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    %q = arith.maximumf %x, %z : f32
    linalg.yield %q : f32
  } -> tensor<1x1xf32>
  %e2 = tensor.empty() : tensor<1x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e2 : tensor<1x4xf32>) -> tensor<1x4xf32>
  %m = linalg.matmul ins(%r, %w : tensor<1x1xf32>, tensor<1x4xf32>) outs(%f : tensor<1x4xf32>) -> tensor<1x4xf32>
  return %m : tensor<1x4xf32>
}"""
    check(text, {"a": a, "w": w}, np.maximum(a, 0) @ w)
    check(text, {"a": -a, "w": w}, np.maximum(-a, 0) @ w)


def test_unit_levels_are_read_dense():
    """A CSR 3x1 input is read with its row level compressed and its unit column level dense, a
    stored copy named after its levels; a CSR 1x4 input needs no change."""
    text = elementwise("copy", ["tensor<3x1xf32, #CSR>"], "tensor<3x1xf32>", "linalg.yield %x0 : f32")
    graph = compile_schedule(fuseflow.from_mlir(text), "full").kernels[0].graph
    meta = graph.tensors["a0[cd]"]
    assert meta.source == "a0" and meta.levels == ("compressed", "dense")
    assert str(TensorFormat.parse("dense,compressed").constant_levels_dense({0})) == "dense,compressed"


@pytest.mark.parametrize("schedule", ["unfused format.t0=dense,compressed",
                                      "fusion=[t0][t1] format.t0=dense,compressed;order=1,0"])
def test_declared_formats_of_unit_intermediates(schedule):
    """t0 = relu(a) of a CSR 3x1 column, written between kernels in a declared CSR (its unit level
    compressed) or CSC (the unit dimension outermost): the writer stores the unit level dense and
    innermost, filtering on the row level instead, as readers do."""
    a, w = np.array([[1.0], [0.0], [-2.0]]), np.array([[1.0, -1, 0, 2]])
    text = ENCODINGS + """
func.func @f(%a: tensor<3x1xf32, #CSR>, %w: tensor<1x4xf32, #CSC>) -> tensor<3x4xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x1xf32>
  %t0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<3x1xf32, #CSR>) outs(%e : tensor<3x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    %q = arith.maximumf %x, %z : f32
    linalg.yield %q : f32
  } -> tensor<3x1xf32>
  %e2 = tensor.empty() : tensor<3x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e2 : tensor<3x4xf32>) -> tensor<3x4xf32>
  %t1 = linalg.matmul ins(%t0, %w : tensor<3x1xf32>, tensor<1x4xf32, #CSC>)
                      outs(%f : tensor<3x4xf32>) -> tensor<3x4xf32>
  return %t1 : tensor<3x4xf32>
}"""
    result = simulate(fuseflow.from_mlir(text), schedule, {"a": a, "w": w})
    assert result.verified and np.allclose(result.outputs["t1"], np.maximum(a, 0) @ w)


def test_a_declared_column_major_format_of_a_1x1_intermediate():
    """Both dimensions unit (fuzz program 341 of seed 5): the declared order=1,0 is the natural one."""
    a, b = np.array([[3.0]]), np.array([[-1.0]])
    text = elementwise("sub", ["tensor<1x1xf32, #DCSR>", "tensor<1x1xf32, #CSR>"], "tensor<1x1xf32>",
                       "%m = arith.subf %x0, %x1 : f32\n    linalg.yield %m : f32")
    result = simulate(fuseflow.from_mlir(text), "unfused format.r=compressed,compressed;order=1,0", {"a0": a, "a1": b})
    assert result.verified and np.allclose(result.outputs["r"], a - b)
