"""MLIR constructs real dumps use, each imported, simulated (unfused, fully fused, fully fused with
induced layouts) and checked against numpy written here: reductions accumulating into an
argument, older sparse-encoding syntax, named elementwise ops (and the older elemwise_unary /
elemwise_binary), tensor.concat, linalg.map / linalg.reduce, bodies that leave an uninitialised
`outs` unread, and older torch-mlir forms (linalg.init_tensor, expand_shape without
output_shape, arith.maxf), and dynamic sizes given by `--shape` or by `--inputs` data on
every command. An unfilled tensor.empty read anywhere is refused under `strict`."""
import numpy as np
import pytest

import fuseflow
from fuseflow.errors import NotSupported
from fuseflow.ir.canonicalize import prepare
from fuseflow.pipeline import simulate

SCHEDULES = ("unfused", "full", "full layout=induced")
RNG = np.random.default_rng(18)


def data(*shapes, density=1.0):
    return [np.where(RNG.random(s) < density, RNG.integers(-4, 5, size=s) / 2.0, 0.0) for s in shapes]


def check(text: str, inputs: dict, want: dict):
    program = fuseflow.from_mlir(text)
    for schedule in SCHEDULES:
        result = simulate(program, schedule, inputs)
        assert result.verified, schedule
        for name, expected in want.items():
            assert np.allclose(result.outputs[name], expected), (schedule, name)
    return program


def test_matmul_accumulating_into_an_argument():
    """`linalg.matmul ins(%a, %b) outs(%c)` with %c an argument: Y = C + A·B."""
    a, b, c = data((4, 3), (3, 5), (4, 5))
    text = """
func.func @acc(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %c: tensor<4x5xf32>) -> tensor<4x5xf32> {
  %y = linalg.matmul ins(%a, %b : tensor<4x3xf32>, tensor<3x5xf32>) outs(%c : tensor<4x5xf32>) -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}"""
    program = check(text, {"a": a, "b": b, "c": c}, {"y": c + a @ b})
    assert [str(op) for op in prepare(program).ops] == \
        ["y_r(i,j) = sum[k] a(i,k) * b(k,j)", "y(i,j) = c(i,j) + y_r(i,j)"]


def test_max_reduction_starts_from_its_argument():
    a, c = data((4, 6), (4,))
    text = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @rowmax(%a: tensor<4x6xf32, #CSR>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %m = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<4x6xf32, #CSR>) outs(%c : tensor<4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %m : tensor<4xf32>
}"""
    a = a * (RNG.random(a.shape) < 0.5)
    check(text, {"a": a, "c": c}, {"m": np.maximum(c, a.max(axis=1))})


@pytest.mark.parametrize("encoding", [
    '{ lvlTypes = [ "dense", "compressed" ], dimToLvl = affine_map<(i, j) -> (j, i)> }',
    '{ dimLevelType = [ "dense", "compressed" ], dimOrdering = affine_map<(i, j) -> (j, i)>, pointerBitWidth = 32 }',
    '{ lvlTypes = [ "compressed", "compressed" ] }',
])
def test_older_encoding_syntax(encoding):
    a, x = data((6, 5), (5, 3), density=0.4)
    text = f"""
#S = #sparse_tensor.encoding<{encoding}>
func.func @spmm(%a: tensor<6x5xf32, #S>, %x: tensor<5x3xf32>) -> tensor<6x3xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x3xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<6x3xf32>) -> tensor<6x3xf32>
  %y = linalg.matmul ins(%a, %x : tensor<6x5xf32, #S>, tensor<5x3xf32>) outs(%f : tensor<6x3xf32>) -> tensor<6x3xf32>
  return %y : tensor<6x3xf32>
}}"""
    program = check(text, {"a": a, "x": x}, {"y": a @ x})
    fmt = program.tensors["a"].format
    assert fmt.levels[1].is_compressed and fmt.mode_order == ((1, 0) if "dimToLvl" in encoding or
                                                              "dimOrdering" in encoding else (0, 1))


NAMED = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
         "min": np.minimum}


@pytest.mark.parametrize("op", sorted(NAMED))
def test_named_elementwise_binary_ops(op):
    a, b = data((3, 4), (3, 4))
    b = np.where(b == 0, 1.0, b) if op == "div" else b
    text = f"""
func.func @f(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<3x4xf32> {{
  %e = tensor.empty() : tensor<3x4xf32>
  %r = linalg.{op} ins(%a, %b : tensor<3x4xf32>, tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}}"""
    check(text, {"a": a, "b": b}, {"r": NAMED[op](a, b)})


@pytest.mark.parametrize("spelling", ["linalg.exp", "linalg.elemwise_unary {fun = #linalg.unary_fn<exp>}",
                                      "linalg.elemwise_unary"])
def test_named_unary_ops_and_the_older_elemwise_form(spelling):
    a, b = data((3, 4), (3, 4))
    text = f"""
func.func @f(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<3x4xf32> {{
  %e = tensor.empty() : tensor<3x4xf32>
  %x = {spelling} ins(%a : tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %r = linalg.elemwise_binary {{fun = #linalg.binary_fn<mul>}} ins(%x, %b : tensor<3x4xf32>, tensor<3x4xf32>)
       outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}}"""
    check(text, {"a": a, "b": b}, {"r": np.exp(a) * b})


@pytest.mark.parametrize("dim", [0, 1])
def test_tensor_concat(dim):
    a, b = data((2, 3), (4, 3)) if dim == 0 else data((2, 3), (2, 1))
    out = np.concatenate([a, b], axis=dim)
    ta, tb, tc = (f"tensor<{x.shape[0]}x{x.shape[1]}xf32>" for x in (a, b, out))
    text = f"""
#CSR = #sparse_tensor.encoding<{{ map = (i, j) -> (i : dense, j : compressed) }}>
func.func @cat(%a: {ta}, %b: {tb}) -> {tc} {{
  %c = tensor.concat dim({dim}) %a, %b : ({ta}, {tb}) -> {tc}
  %e = tensor.empty() : {tc}
  %r = linalg.exp ins(%c : {tc}) outs(%e : {tc}) -> {tc}
  return %r : {tc}
}}"""
    check(text, {"a": a, "b": b}, {"r": np.exp(out)})


def test_map_and_reduce_and_bodies_that_leave_the_output_unread():
    """linalg.map and an elementwise linalg.generic write into a bare tensor.empty they never
    read; linalg.reduce sums rows into a filled init."""
    a, b = data((3, 4), (3, 4))
    text = """
func.func @f(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<3xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x4xf32>
  %m = linalg.map { arith.mulf } ins(%a, %b : tensor<3x4xf32>, tensor<3x4xf32>) outs(%e : tensor<3x4xf32>)
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) {
  ^bb0(%x: f32, %unused: f32):
    %n = arith.negf %x : f32
    linalg.yield %n : f32
  } -> tensor<3x4xf32>
  %r0 = tensor.empty() : tensor<3xf32>
  %r1 = linalg.fill ins(%z : f32) outs(%r0 : tensor<3xf32>) -> tensor<3xf32>
  %s = linalg.reduce { arith.addf } ins(%g : tensor<3x4xf32>) outs(%r1 : tensor<3xf32>) dimensions = [1]
  return %s : tensor<3xf32>
}"""
    check(text, {"a": a, "b": b}, {"s": -(a * b).sum(axis=1)})


def test_older_torch_mlir_forms():
    """linalg.init_tensor for tensor.empty, expand_shape without output_shape, arith.maxf."""
    a, = data((6, 2))
    text = """
func.func @f(%a: tensor<6x2xf32>) -> tensor<1x6x2xf32> {
  %z = arith.constant 0.0 : f32
  %e = linalg.init_tensor [6, 2] : tensor<6x2xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<6x2xf32>) outs(%e : tensor<6x2xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.maxf %x, %z : f32
    linalg.yield %m : f32
  } -> tensor<6x2xf32>
  %x = tensor.expand_shape %r [[0, 1], [2]] : tensor<6x2xf32> into tensor<1x6x2xf32>
  return %x : tensor<1x6x2xf32>
}"""
    check(text, {"a": a}, {"x": np.maximum(a, 0)[None]})


@pytest.mark.parametrize("body, what", [
    ("%r = arith.addf %x, %acc : f32", "a reduction into an uninitialised tensor.empty"),
    ("%r = arith.maximumf %x, %acc : f32", "a reduction into an uninitialised tensor.empty"),
])
def test_reductions_into_an_unfilled_empty_are_refused_when_strict(body, what):
    """MLIR leaves a tensor.empty's values undefined: under `strict` a reduction's start read
    from one is refused, as reading it as data is (otherwise zeros: tests/test_mlir_forms.py)."""
    text = f"""
func.func @f(%a: tensor<3x4xf32>) -> tensor<3xf32> {{
  %e = tensor.empty() : tensor<3xf32>
  %s = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}}
      ins(%a : tensor<3x4xf32>) outs(%e : tensor<3xf32>) {{
  ^bb0(%x: f32, %acc: f32):
    {body}
    linalg.yield %r : f32
  }} -> tensor<3xf32>
  return %s : tensor<3xf32>
}}"""
    with pytest.raises(NotSupported, match=what) as err:
        fuseflow.from_mlir(text, strict=True)
    assert "fill the init" in str(err.value)


def test_reading_an_unfilled_empty_as_data_is_refused_when_strict():
    text = """
func.func @f(%a: tensor<3xf32>) -> tensor<3xf32> {
  %e = tensor.empty() : tensor<3xf32>
  %r = linalg.add ins(%a, %e : tensor<3xf32>, tensor<3xf32>) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}"""
    with pytest.raises(NotSupported, match="uninitialised tensor.empty as data"):
        fuseflow.from_mlir(text, strict=True)


def test_unsupported_ops_name_what_is_supported_and_how_to_rewrite():
    text = """
func.func @f(%a: tensor<3x4xf32>) -> tensor<4x3xf32> {
  %r = tensor.pad %a low[0, 0] high[1, -1] {
  ^bb0(%i: index, %j: index):
    %z = arith.constant 0.0 : f32
    tensor.yield %z : f32
  } : tensor<3x4xf32> to tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}"""
    with pytest.raises(NotSupported) as err:
        fuseflow.from_mlir(text)
    assert "tensor.pad" in str(err.value) and "supported:" in str(err.value) and "generalise" in str(err.value)


@pytest.mark.parametrize("start, combine, kind", [("2.0", "arith.addf", "sum"), ("0.5", "arith.maximumf", "max")])
def test_reductions_from_a_filled_constant_other_than_the_identity(start, combine, kind):
    """A sum into a tensor filled with 2 is 2 + the sum; a max from 0.5 is max(0.5, the max)."""
    a, = data((3, 4), density=0.5)
    text = f"""
func.func @f(%a: tensor<3x4xf32>) -> tensor<3xf32> {{
  %c = arith.constant {start} : f32
  %e = tensor.empty() : tensor<3xf32>
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %s = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}}
      ins(%a : tensor<3x4xf32>) outs(%f : tensor<3xf32>) {{
  ^bb0(%x: f32, %acc: f32):
    %r = {combine} %x, %acc : f32
    linalg.yield %r : f32
  }} -> tensor<3xf32>
  return %s : tensor<3xf32>
}}"""
    want = 2.0 + a.sum(axis=1) if kind == "sum" else np.maximum(0.5, a.max(axis=1))
    check(text, {"a": a}, {"s": want})


DYNAMIC_NAMED = """
func.func @f(%a: tensor<?x3xf32>, %b: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?x3xf32>
  %e = tensor.empty(%n) : tensor<?x3xf32>
  %s = linalg.add ins(%a, %b : tensor<?x3xf32>, tensor<?x3xf32>) outs(%e : tensor<?x3xf32>) -> tensor<?x3xf32>
  %r = linalg.exp ins(%s : tensor<?x3xf32>) outs(%e : tensor<?x3xf32>) -> tensor<?x3xf32>
  return %r : tensor<?x3xf32>
}"""


def test_dynamic_shapes_from_the_command_line_and_from_input_data(tmp_path, capsys):
    """Named ops over a dynamic dimension: every command takes its size from `--shape NAME=AxB`,
    and `simulate --inputs` from the data (checked against numpy through --save-outputs)."""
    from fuseflow.cli import main

    path = tmp_path / "dyn.mlir"
    path.write_text(DYNAMIC_NAMED)
    shapes = ["--shape", "a=4x3", "--shape", "b=4x3"]
    for command in (["inspect"], ["compile"], ["orders"], ["simulate", "--json"]):
        assert main([command[0], str(path), *shapes, *command[1:]]) == 0, command
    assert '"verified": true' in capsys.readouterr().out
    a, b = data((5, 3), (5, 3))
    np.savez(tmp_path / "in.npz", a=a, b=b)
    assert main(["simulate", str(path), "--inputs", str(tmp_path / "in.npz"), "--schedule", "unfused",
                 "--save-outputs", str(tmp_path / "out.npz")]) == 0
    with np.load(tmp_path / "out.npz") as out:
        assert np.allclose(out["out0"], np.exp(a + b))
