"""Bad input gives one line naming what is wrong and where (file:line:col or the tensor).

UserError is the user's mistake; NotSupported is valid input fuseflow does not handle.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fuseflow
from fuseflow import FuseflowError, NotSupported, TensorFormat, UserError

MLIR = Path(__file__).parent / "mlir"
ID = "affine_map<(d0) -> (d0)>"


def one_line(cls, fn, *args, **kwargs) -> str:
    """Call fn, expecting `cls`; return its message after checking it is a single line."""
    with pytest.raises(cls) as info:
        fn(*args, **kwargs)
    assert type(info.value) is cls  # a NotSupported is not reported as a UserError, nor vice versa
    message = str(info.value)
    assert "\n" not in message and message.strip() == message and message
    return message


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def loc_of(path: Path, needle: str) -> str:
    """`file:line:col` (1-based) of the first occurrence of needle, as MLIR reports an op."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return f"{path}:{number}:{line.index(needle) + 1}"
    raise AssertionError(f"{needle!r} not in {path}")


def elementwise(body: str, in_type: str = "tensor<4xf32>") -> str:
    return f"""func.func @f(%a: {in_type}) -> tensor<4xf32> {{
  %e = tensor.empty() : tensor<4xf32>
  %y = linalg.generic {{indexing_maps = [{ID}, {ID}], iterator_types = ["parallel"]}}
      ins(%a : {in_type}) outs(%e : tensor<4xf32>) {{
  ^bb0(%x: f32, %o: f32):
{body}
  }} -> tensor<4xf32>
  return %y : tensor<4xf32>
}}
"""


# -- malformed MLIR ------------------------------------------------------------

def test_syntax_error_names_file_line_col(tmp_path):
    path = write(tmp_path, "bad.mlir", """func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %b = arith.addf %a %a : tensor<4xf32>
  return %b : tensor<4xf32>
}
""")
    message = one_line(UserError, fuseflow.from_mlir, path)
    assert message.startswith(f"{path}:2:21: expected ','")


def test_syntax_error_in_text_source():
    message = one_line(UserError, fuseflow.from_mlir, "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                                                      "  return %a : tensor<4xf33>\n}\n")
    assert message.startswith("<mlir>:2:")


def test_verifier_rejects_inconsistent_shapes(tmp_path):
    path = write(tmp_path, "mismatch.mlir", """
func.func @f(%a: tensor<4x5xf32>, %b: tensor<6x3xf32>) -> tensor<4x3xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %c = linalg.matmul ins(%a, %b : tensor<4x5xf32>, tensor<6x3xf32>) outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %c : tensor<4x3xf32>
}
""")
    message = one_line(UserError, fuseflow.from_mlir, path)
    assert message.startswith(loc_of(path, "linalg.matmul") + ": 'linalg.matmul' op")
    assert "6" in message and "5" in message


def test_inconsistent_shapes_past_the_mlir_verifier(tmp_path):
    # tensor.cast hides the static 5 from the verifier; fuseflow sees A's real extent.
    path = write(tmp_path, "cast.mlir", """func.func @f(%a: tensor<4x5xf32>, %b: tensor<6x3xf32>) -> tensor<4x3xf32> {
  %z = arith.constant 0.0 : f32
  %ac = tensor.cast %a : tensor<4x5xf32> to tensor<4x?xf32>
  %e = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %c = linalg.matmul ins(%ac, %b : tensor<4x?xf32>, tensor<6x3xf32>) outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %c : tensor<4x3xf32>
}
""")
    message = one_line(UserError, fuseflow.from_mlir, path)
    assert message.startswith(loc_of(path, "linalg.matmul") + ": shape mismatch")
    assert "b(k,j) has size 6" in message and "5" in message


def test_no_function_and_ambiguous_function(tmp_path):
    decl = write(tmp_path, "decl.mlir", "func.func private @ext(tensor<2xf32>) -> tensor<2xf32>\n")
    assert "no function with a body" in one_line(UserError, fuseflow.from_mlir, decl)
    two = write(tmp_path, "two.mlir", """func.func @a(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
func.func @b(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
""")
    message = one_line(UserError, fuseflow.from_mlir, two)
    assert message.startswith(f"{two}: the module has 2 functions") and "a, b" in message
    assert "no function @c" in one_line(UserError, fuseflow.from_mlir, two, func="c")
    assert fuseflow.from_mlir(two, func="b").name == "b"


# -- valid MLIR that fuseflow does not handle ------------------------------------

UNSUPPORTED = {
    "pad": ("""func.func @f(%a: tensor<4xf32>) -> tensor<6xf32> {
  %z = arith.constant 0.0 : f32
  %p = tensor.pad %a low[1] high[1] {
  ^bb0(%i: index):
    tensor.yield %z : f32
  } : tensor<4xf32> to tensor<6xf32>
  return %p : tensor<6xf32>
}
""", "operation tensor.pad", "tensor.pad"),
    "conv": ("""func.func @f(%x: tensor<1x8x8x3xf32>, %w: tensor<3x3x3x4xf32>) -> tensor<1x6x6x4xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x6x6x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x6x6x4xf32>) -> tensor<1x6x6x4xf32>
  %c = linalg.conv_2d_nhwc_hwcf ins(%x, %w : tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>)
                                outs(%f : tensor<1x6x6x4xf32>) -> tensor<1x6x6x4xf32>
  return %c : tensor<1x6x6x4xf32>
}
""", "linalg.conv_2d_nhwc_hwcf", "linalg.conv_2d_nhwc_hwcf"),
    "sin": (elementwise("    %s = math.sin %x : f32\n    linalg.yield %s : f32"),
            "operation math.sin in a linalg body", "math.sin"),
    "cmpf_ord": (elementwise("    %c = arith.cmpf ord, %x, %x : f32\n    %s = arith.select %c, %x, %o : f32\n"
                             "    linalg.yield %s : f32"), "arith.cmpf predicate ord", "arith.cmpf"),
    "strided_map": ("""func.func @f(%a: tensor<4xf32>) -> tensor<2xf32> {
  %e = tensor.empty() : tensor<2xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0 * 2)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%e : tensor<2xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<2xf32>
  return %y : tensor<2xf32>
}
""", "indexing expression d0 * 2 in linalg.generic", "linalg.generic"),
    "product_reduction": ("""func.func @f(%a: tensor<2x3xf32>) -> tensor<2xf32> {
  %e = tensor.empty() : tensor<2xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]} ins(%a : tensor<2x3xf32>) outs(%e : tensor<2xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.mulf %x, %o : f32
    linalg.yield %s : f32
  } -> tensor<2xf32>
  return %y : tensor<2xf32>
}
""", "reduction body that is not add/max/min", "linalg.generic"),
    "read_empty": ("""func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %y = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
      ins(%a, %e : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %z: f32, %o: f32):
    %s = arith.addf %x, %z : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %y : tensor<4xf32>
}
""".replace("#map", ID), "uninitialised tensor.empty", "tensor.empty"),
    "nm_sparsity": ("""#NV = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : structured[2, 4]) }>
func.func @f(%a: tensor<4x8xf32, #NV>) -> tensor<4x8xf32, #NV> {
  return %a : tensor<4x8xf32, #NV>
}
""", "n:m structured sparsity", "func.func"),
    "integer_tensor": ("""func.func @f(%a: tensor<4xi8>) -> tensor<4xi8> {
  return %a : tensor<4xi8>
}
""", "element type i8", "func.func"),
    "unranked": ("""func.func @f(%a: tensor<*xf32>) -> tensor<*xf32> {
  return %a : tensor<*xf32>
}
""", "tensor<*xf32> (only ranked tensors)", "func.func"),
}


@pytest.mark.parametrize("name", list(UNSUPPORTED))
def test_not_supported_names_construct_and_location(tmp_path, name):
    text, construct, at = UNSUPPORTED[name]
    path = write(tmp_path, f"{name}.mlir", text)
    message = one_line(NotSupported, fuseflow.from_mlir, path, strict=True)  # strict: an unfilled empty too
    assert message.startswith(loc_of(path, at) + ": "), message
    assert construct in message


def test_reshape_of_a_sparse_tensor(tmp_path):
    path = write(tmp_path, "sparse_reshape.mlir", """
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
func.func @f(%a: tensor<2x6xf32, #DCSR>) -> tensor<12xf32> {
  %r = tensor.collapse_shape %a [[0, 1]] : tensor<2x6xf32, #DCSR> into tensor<12xf32>
  return %r : tensor<12xf32>
}
""")
    message = one_line(UserError, fuseflow.from_mlir, path)
    assert message.startswith(loc_of(path, "tensor.collapse_shape") + ": reshape of sparse tensor a")


# -- data given to reference / random_inputs ---------------------------------------

@pytest.fixture(scope="module")
def spmv():
    return fuseflow.from_mlir(MLIR / "spmv.mlir")


@pytest.fixture(scope="module")
def dynamic():
    return fuseflow.from_mlir(MLIR / "dynamic.mlir")


def test_data_of_wrong_shape(spmv):
    message = one_line(UserError, fuseflow.reference, spmv, {"A": np.ones((48, 64)), "x": np.ones(48)})
    assert message.startswith("program spmv: data for input A has shape (48, 64), declared [64,48]")
    message = one_line(UserError, fuseflow.reference, spmv, {"A": np.ones((64, 48)), "x": np.ones((48, 1))})
    assert "input x has shape (48, 1), declared [48]" in message


def test_data_shapes_inconsistent_across_an_op():
    text = """func.func @mm(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %n = tensor.dim %b, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %c = linalg.matmul ins(%a, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%f : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %c : tensor<?x?xf32>
}"""
    p = fuseflow.from_mlir(text)
    assert fuseflow.reference(p, {"a": np.ones((3, 4)), "b": np.ones((4, 2))})["c"].shape == (3, 2)
    message = one_line(UserError, fuseflow.reference, p, {"a": np.ones((3, 4)), "b": np.ones((5, 2))})
    assert message.startswith("<mlir>:9:8: shape mismatch: index k of b(k,j) has size 5")


def test_dynamic_dimension_without_data(dynamic):
    message = one_line(UserError, fuseflow.random_inputs, dynamic)
    assert "input A has a dynamic shape (None, 8)" in message and "shapes={'A'" in message
    w = np.eye(8, 4)
    message = one_line(UserError, fuseflow.reference, dynamic, {"W": w})
    assert "no data for input 'A' of program dynamic" in message
    message = one_line(UserError, fuseflow.reference, dynamic, {"A": np.ones((5, 9)), "W": w})
    assert "data for input A has shape (5, 9), declared [?,8]" in message
    # a dynamic dimension nothing determines is reported by shape inference
    message = one_line(UserError, fuseflow.ir.infer_shapes, dynamic, {"W": (8, 4)})
    assert "dynamic dimension of A is not determined by the data" in message


def test_missing_and_unknown_inputs(spmv):
    message = one_line(UserError, fuseflow.reference, spmv, {"A": np.ones((64, 48))})
    assert message.startswith("no data for input 'x' of program spmv")
    message = one_line(UserError, fuseflow.reference, spmv,
                       {"A": np.ones((64, 48)), "x": np.ones(48), "z": np.ones(3)})
    assert "data given for 'z', which is not an input of program spmv" in message
    assert "inputs are A, x" in message


@pytest.mark.parametrize("density", [0.0, -0.5, 1.5])
def test_bad_density(spmv, density):
    message = one_line(UserError, fuseflow.random_inputs, spmv, density=density)
    assert f"density {density} is outside (0, 1]" in message


# -- formats, files, names -----------------------------------------------------------

@pytest.mark.parametrize("fmt, expected", [
    ("dense,sparse", "unknown level format 'sparse'"),
    ("dense", "has 1 levels but the tensor has 2 dimensions"),
    ("dense,compressed,compressed", "has 3 levels but the tensor has 2 dimensions"),
    ("dense,compressed;order=0,0", "mode order (0, 0) is not a permutation"),
    ("dense,compressed;order=a,b", "cannot read 'order=a,b'"),
    ("dense,compressed;tile=2x2", "cannot read 'tile=2x2'"),
    ("dense,compressed;block=4", "block shape (4,) does not match rank 2"),
    (" ; ", "empty format"),
])
def test_bad_format_strings(fmt, expected):
    message = one_line(UserError, fuseflow.from_mlir, MLIR / "spmv.mlir", formats={"A": fmt})
    assert message.startswith("format of A: ") and expected in message


def test_format_for_a_non_input(spmv):
    message = one_line(UserError, fuseflow.from_mlir, MLIR / "spmv.mlir", formats={"y": "dense"})
    assert message.startswith("program spmv: format given for 'y', which is not an input")
    assert one_line(UserError, TensorFormat.parse, "c,q").startswith("unknown level format 'q'")


def test_missing_file(tmp_path):
    missing = tmp_path / "nowhere" / "model.mlir"
    message = one_line(UserError, fuseflow.from_mlir, missing)
    assert message.startswith(f"no such MLIR file: {missing}")
    assert f"no such MLIR file: {missing}" in one_line(UserError, fuseflow.from_mlir, str(missing))


def test_wrong_number_of_argument_names():
    message = one_line(UserError, fuseflow.from_mlir, MLIR / "spmv.mlir", arg_names=["A"])
    assert message.startswith(f"{MLIR / 'spmv.mlir'}:4:1: 1 argument names for 2 arguments")


def test_errors_share_a_base_and_format():
    err = UserError("shape mismatch for A", where="gcn.mlir:4:5", fix="give A\n6 rows")
    assert isinstance(err, FuseflowError) and isinstance(NotSupported("x"), FuseflowError)
    assert str(err) == "gcn.mlir:4:5: shape mismatch for A (fix: give A 6 rows)"
    assert (err.what, err.where) == ("shape mismatch for A", "gcn.mlir:4:5")
