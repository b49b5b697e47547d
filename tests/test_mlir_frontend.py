"""Hand-written MLIR files (tests/mlir/*.mlir) -> Program -> numpy reference.

Each case checks the imported index notation and storage formats, then compares
`fuseflow.reference` on seeded random data with an independent numpy/scipy
computation of the same kernel, in float64 and float32.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import erf

import fuseflow
from fuseflow import Program, TensorFormat
from fuseflow.ir import IndexOp, ReshapeOp

MLIR = Path(__file__).parent / "mlir"


def softmax_rows(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@dataclass
class Case:
    file: str
    ops: list[str]  # str() of every op, in program order
    formats: dict[str, str]  # formats of some tensors
    expected: Callable[[dict], dict]  # independent numpy/scipy computation of the outputs
    density: float = 0.25
    shapes: dict = field(default_factory=dict)  # for dynamic inputs


CASES = [
    Case("spmv", ["y(i) = sum[j] A(i,j) * x(j)"],
         {"A": "dense,compressed", "x": "dense", "y": "dense"},
         lambda d: {"y": sp.csr_matrix(d["A"]) @ d["x"]}),
    Case("spmm_ikj", ["Y(i,k) = sum[j] A(i,j) * X(j,k)"],
         {"A": "dense,compressed", "X": "dense,dense"},
         lambda d: {"Y": sp.csr_matrix(d["A"]) @ d["X"]}),
    Case("spmm_jik", ["Y(k,i) = sum[j] A(k,j) * X(j,i)"],
         {"A": "dense,compressed;order=1,0", "X": "dense,dense"},
         lambda d: {"Y": sp.csc_matrix(d["A"]) @ d["X"]}),
    Case("sddmm", ["O(i,j) = sum[k] S(i,j) * A(i,k) * B(k,j)"],
         {"S": "compressed,compressed", "A": "dense,dense", "O": "dense,dense"},
         lambda d: {"O": sp.csr_matrix(d["S"]).multiply(d["A"] @ d["B"]).toarray()}, density=0.1),
    Case("sddmm_masked", ["P(i,j) = sum[k] A(i,k) * B(k,j)", "O(i,j) = S(i,j) * P(i,j)"],
         {"S": "compressed,compressed", "P": "dense,dense"},
         lambda d: {"O": d["S"] * (d["A"] @ d["B"])}, density=0.1),
    Case("matmul_chain", ["T(i,j) = sum[k] A(i,k) * B(k,j)", "O(i,j) = sum[k] T(i,k) * C(k,j)"],
         {"A": "compressed,compressed", "B": "dense,dense", "C": "dense,compressed", "T": "dense,dense"},
         lambda d: {"O": (sp.coo_matrix(d["A"]) @ d["B"]) @ sp.csr_matrix(d["C"])}),
    Case("softmax_sparse",
         ["m(i) = max[j] X(i,j)", "m2(i,0) = m(i)", "E(i,j) = exp(X(i,j) - m2(i,0))",
          "s(i) = sum[j] E(i,j)", "O(i,j) = E(i,j) / s(i)"],
         {"X": "dense,compressed", "m": "dense", "m2": "dense,dense"},
         lambda d: {"O": softmax_rows(d["X"])}, density=0.4),
    Case("batch_matmul", ["O(i,j,k) = sum[l] A(i,j,l) * X(i,l,k)"],
         {"A": "dense,dense,compressed", "X": "dense,dense,dense"},
         lambda d: {"O": np.stack([sp.csr_matrix(a) @ x for a, x in zip(d["A"], d["X"])])}),
    Case("transpose", ["T(i,j) = A(j,i)", "U(i,j) = B(j,i)"],
         {"A": "dense,compressed;order=1,0", "T": "dense,dense"},
         lambda d: {"T": d["A"].T, "U": d["B"].T}),
    Case("relu", ["AX(i,j) = sum[k] A(i,k) * X(k,j)", "H(i,j) = max(AX(i,j) + b(j), 0)"],
         {"A": "dense,compressed", "b": "dense"},
         lambda d: {"H": np.where(d["A"] @ d["X"] + d["b"] > 0, d["A"] @ d["X"] + d["b"], 0.0)}),
    Case("gelu", ["O(i,j) = X(i,j) * 0.5 * (erf(X(i,j) * 0.7071067690849304) + 1)"],
         {"X": "compressed,compressed"},
         # the MLIR constant 0.707106769 is 1/sqrt(2) rounded to f32
         lambda d: {"O": 0.5 * d["X"] * (1 + erf(d["X"] * float(np.float32(1 / np.sqrt(2)))))}),
    Case("unary_ops", ["O(i,j) = min(tanh(A(i,j)), -B(i,j)) + sqrt(abs(A(i,j))) * rsqrt(B(i,j) * B(i,j) + 1)"],
         {"A": "dense,compressed", "B": "dense,dense"},
         lambda d: {"O": np.minimum(np.tanh(d["A"]), -d["B"])
                    + np.sqrt(np.abs(d["A"])) / np.sqrt(d["B"] ** 2 + 1)}),
    Case("reshape", ["F = reshape(X, [0,1])", "G(i) = F(i) + b(i)", "U(0,i) = G(i)", "H(i) = U(0,i)",
                     "R = reshape(H, [0,1])"],
         {"X": "dense,dense", "U": "dense,dense", "R": "dense,dense"},
         lambda d: {"U": (d["X"].ravel() + d["b"])[None, :], "R": (d["X"].ravel() + d["b"]).reshape(3, 4)}),
    Case("constants", ["xW(i,j) = sum[k] x(i,k) * W(k,j)", "Y(i,j) = (xW(i,j) + bias(j)) * scale(j)"],
         {"x": "dense,compressed", "W": "dense,dense", "bias": "dense"},
         lambda d: {"Y": (sp.csr_matrix(d["x"]) @ d["W"] + 0.5) * np.array([1.0, -2.0, 3.0, 0.25])}),
    Case("dynamic", ["Y(i,j) = sum[k] A(i,k) * W(k,j)"],
         {"A": "dense,dense", "W": "dense,compressed"},
         lambda d: {"Y": d["A"] @ sp.csr_matrix(d["W"])}, shapes={"A": (7, 8)}),
    Case("shared_induced",
         ["P(i,j) = A(i,j) * 2", "R1(i,j,k) = P(i,j) * B(i,k)", "Z(i,j,k) = R1(i,j,k) + P(i,j) * D(i,k)"],
         {"A": "dense,dense", "B": "dense,compressed", "D": "dense,dense"},
         lambda d: {"Z": 2 * d["A"][:, :, None] * (d["B"] + d["D"])[:, None, :]}),
    Case("shared_filter", ["T(i,j) = A(i,j) * 2", "Y(i,j) = T(i,j) * M(i,j)", "Z(i,j) = T(i,j) + Y(i,j)"],
         {"A": "dense,compressed", "M": "dense,compressed"},
         lambda d: {"Z": 2 * d["A"] + 2 * d["A"] * d["M"]}),
    Case("masked_softmax", ["filled(i,j) = select(M(i,j) == 0, -inf, S(i,j))", "max(i) = max[j] filled(i,j)",
                            "ex(i,j) = exp(filled(i,j) - max(i))", "sum(i) = sum[j] ex(i,j)",
                            "out(i,j) = ex(i,j) / sum(i)"],
         {"S": "dense,dense", "M": "dense,compressed"},
         lambda d: {"out": _masked_softmax(d["S"], d["M"])}),
    Case("args_out_of_order", ["p(i,j) = sum[k] arg2(i,k) * arg0(k,j)", "y(i,j) = p(i,j) + arg1(j)"],
         {"arg2": "dense,dense", "arg0": "dense,dense", "arg1": "dense"},
         lambda d: {"y": d["arg2"] @ d["arg0"] + d["arg1"]}),
    Case("empty_init", ["Y(i,j) = sum[k] A(i,k) * X(k,j)", "S(i,j) = 0 + Y(i,j)"],
         {"A": "dense,compressed", "S": "dense,compressed"},
         lambda d: {"Y": d["A"] @ d["X"], "S": d["A"] @ d["X"]}),
    Case("integers", ["Y(i,j) = N(i,j) * X(i,j)", "T(i,j) = N(i,j) * 3 + 1"],
         {"N": "dense,dense"},
         lambda d: {"Y": d["N"].astype(np.int64) * d["X"], "T": d["N"].astype(np.int64) * 3 + 1}),
    Case("nonfinite", ["T(i,j) = X(i,j) / 0", "E(i,j) = exp(X(i,j) * 10000)", "AT(i,k) = sum[j] A(i,j) * T(j,k)",
                       "AE(i,k) = sum[j] A(i,j) * E(j,k)", "S(i,j) = A(i,j) * T(i,j)"],
         {"A": "dense,compressed", "T": "dense,dense", "S": "dense,compressed"},
         lambda d: _sparse_products_of_non_finite(d), density=0.15),
    Case("outs_written", ["XB(i,k) = X + sum[j] A(i,j) * B(j,k)", "R(i,j) = max(XB(i,j), 0)", "E(i,j) = exp(A(i,j))"],
         {"A": "dense,compressed", "R": "dense,dense"},
         lambda d: {"R": np.maximum(d["X"] + d["A"] @ d["B"], 0.0), "E": np.exp(d["A"])}),
    Case("zero_product", ["H(i) = sum[j] We(i,j) * x(j)", "D(i) = sum[j] 0 * H(j)", "Y(i) = D(i) + b(i)"],
         {"x": "compressed", "We": "compressed,compressed"},
         lambda d: {"Y": d["b"]}),
    Case("constant_operand", ["count(i) = 16", "sum(i) = sum[j] x(i,j)", "mean(i) = sum(i) / count(i)",
                              "sq(i) = sum[j] (x(i,j) - mean(i)) * (x(i,j) - mean(i))", "var(i) = sq(i) / (4 * 4)",
                              "y(i,j) = (x(i,j) - mean(i)) * rsqrt(var(i) + 9.999999747378752e-06)"],
         {"x": "dense,dense"}, lambda d: {"y": _layer_norm(d["x"], np.float32(1e-5))}),
]


def _layer_norm(x, eps):
    """Rows of x less their mean, over their standard deviation (eps added to the variance)."""
    centred = x - x.mean(axis=1, keepdims=True)
    return centred / np.sqrt((centred ** 2).mean(axis=1, keepdims=True) + eps)


def _sparse_products_of_non_finite(d):
    """nonfinite.mlir by scipy: only A's stored entries take part in its products."""
    A = sp.csr_array(d["A"])
    with np.errstate(all="ignore"):
        T, E = d["X"] / 0.0, np.exp(10000.0 * d["X"])
        return {"AT": A @ T, "AE": A @ E, "S": A.multiply(T).toarray()}


def _masked_softmax(S, M):
    """PyTorch's S.masked_fill(M == 0, -inf).softmax(-1), in numpy (all-masked rows are NaN)."""
    filled = np.where(M == 0, -np.inf, S)
    with np.errstate(invalid="ignore"):
        e = np.exp(filled - filled.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
IDS = [c.file for c in CASES]


def load(name: str) -> Program:
    return fuseflow.from_mlir(MLIR / f"{name}.mlir")


def dense(x) -> np.ndarray:
    return x.toarray() if hasattr(x, "toarray") else np.asarray(x)


def test_every_mlir_file_has_a_case():
    files = {p.stem for p in MLIR.glob("*.mlir")}
    assert files == set(IDS)
    for path in MLIR.glob("*.mlir"):
        assert path.read_text().startswith("// "), f"{path.name} lacks a header comment"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_index_notation_and_formats(case: Case):
    p = load(case.file)
    assert [str(op) for op in p.ops] == case.ops
    for name, fmt in case.formats.items():
        assert str(p.tensors[name].format) == fmt, name
        assert p.tensors[name].format == TensorFormat.parse(fmt)
    fuseflow.verify(p)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_reference_matches_numpy(case: Case):
    p = load(case.file)
    data = fuseflow.random_inputs(p, density=case.density, seed=7, shapes=case.shapes)
    assert set(data) == set(p.inputs) - set(p.constants)
    for name, value in data.items():
        tensor = p.tensors[name]
        assert value.shape == tuple(case.shapes.get(name, tensor.shape))
        nonzero = np.count_nonzero(value) / value.size
        if tensor.format.is_dense:
            assert nonzero == 1.0, name
        else:
            assert nonzero == pytest.approx(case.density, abs=1.0 / value.size), name
    expected = {k: dense(v) for k, v in case.expected(data).items()}
    assert set(expected) == set(p.outputs)

    got = fuseflow.reference(p, data)
    assert set(got) == set(p.outputs)
    for name, want in expected.items():
        assert got[name].dtype == np.float64
        assert got[name].shape == want.shape, name
        np.testing.assert_allclose(got[name], want, rtol=1e-12, atol=1e-12, err_msg=name)
        assert np.any(got[name] != 0), f"{name} is trivially zero"

    got32 = fuseflow.reference(p, data, dtype=np.float32)
    for name, want in expected.items():
        assert got32[name].dtype == np.float32
        np.testing.assert_allclose(got32[name], want, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_json_round_trip(case: Case):
    p = load(case.file)
    text = json.dumps(p.to_json(), allow_nan=False)  # strict JSON: -inf etc. must be encoded
    q = Program.from_json(json.loads(text))
    assert [str(op) for op in q.ops] == [str(op) for op in p.ops]
    assert q.inputs == p.inputs and q.outputs == p.outputs
    assert {n: t.describe() for n, t in q.tensors.items()} == {n: t.describe() for n, t in p.tensors.items()}
    assert [op.loc for op in q.ops] == [op.loc for op in p.ops]
    # constant data is not part of the JSON form; everything else prints identically
    q.constants = dict(p.constants)
    assert str(q) == str(p)
    assert q.to_json() == p.to_json()
    data = fuseflow.random_inputs(p, seed=3, shapes=case.shapes)
    for name, value in fuseflow.reference(q, data).items():
        np.testing.assert_array_equal(value, fuseflow.reference(p, data)[name])


def test_spmm_loop_orders_agree():
    ikj, jik = load("spmm_ikj"), load("spmm_jik")
    assert ikj.tensors["A"].format.mode_order == (0, 1)
    assert jik.tensors["A"].format.mode_order == (1, 0)
    assert jik.tensors["A"].format.level_of_mode(1) == 0  # column index stored outermost
    assert ikj.ops[0].vars == ("i", "k", "j") and jik.ops[0].vars == ("k", "i", "j")
    data = fuseflow.random_inputs(ikj, density=0.2, seed=11)
    y1, y2 = fuseflow.reference(ikj, data)["Y"], fuseflow.reference(jik, data)["Y"]
    np.testing.assert_allclose(y1, y2, rtol=1e-13)
    np.testing.assert_allclose(y1, data["A"] @ data["X"], rtol=1e-12)


def test_op_kinds_reductions_and_locations():
    p = load("softmax_sparse")
    kinds = [(op.reduce_kind, op.reduce_vars, op.init) for op in p.ops]
    assert kinds[0] == ("max", ("j",), -np.inf)
    assert kinds[3] == ("sum", ("j",), 0.0)
    assert all(k == (None, (), None) for k in (kinds[1], kinds[2], kinds[4]))
    assert p.outputs == ["O"] and p.intermediates() == ["m", "m2", "E", "s"]
    assert p.ops[0].loc == f"{MLIR / 'softmax_sparse.mlir'}:14:8"
    inter = fuseflow.reference(p, {"X": np.array([[1.0, 3.0] * 6] * 16)}, keep_intermediates=True)
    np.testing.assert_array_equal(inter["m"], np.full(16, 3.0))
    np.testing.assert_array_equal(inter["m2"], np.full((16, 1), 3.0))
    np.testing.assert_allclose(inter["s"], np.full(16, 6 * (1 + np.exp(-2.0))))

    r = load("reshape")
    assert [type(op) for op in r.ops] == [ReshapeOp, IndexOp, IndexOp, IndexOp, ReshapeOp]
    assert r.ops[0].reassociation == ((0, 1),)


def test_constants_become_inputs():
    p = load("constants")
    assert p.inputs == ["x", "W", "bias", "scale"]
    assert "W" not in p.constants  # dense_resource<__elided__>: data must be supplied or generated
    np.testing.assert_array_equal(p.constants["bias"], np.full(4, 0.5))
    np.testing.assert_array_equal(p.constants["scale"], [1.0, -2.0, 3.0, 0.25])
    assert "  input  bias: f32[4] {dense}  (constant)" in str(p).splitlines()
    x, W = np.eye(3, 8), np.arange(32.0).reshape(8, 4)
    y = fuseflow.reference(p, {"x": x, "W": W})["Y"]
    np.testing.assert_allclose(y, (W[:3] + 0.5) * [1.0, -2.0, 3.0, 0.25])
    # supplied data overrides a constant's known data
    y2 = fuseflow.reference(p, {"x": x, "W": W, "bias": np.zeros(4)})["Y"]
    np.testing.assert_allclose(y2, W[:3] * [1.0, -2.0, 3.0, 0.25])


def test_dense_resource_with_data():
    blob = np.array([1.5, -2.0, 0.25, 4.0], dtype=np.float32)
    text = f"""
func.func @res(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %w = arith.constant dense_resource<weights> : tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %y = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
                                        affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}}
      ins(%x, %w : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  }} -> tensor<4xf32>
  return %y : tensor<4xf32>
}}
{{-#
  dialect_resources: {{
    builtin: {{
      weights: "0x04000000{blob.tobytes().hex().upper()}"
    }}
  }}
#-}}
"""
    p = fuseflow.from_mlir(text)
    np.testing.assert_array_equal(p.constants["w"], blob)
    np.testing.assert_allclose(fuseflow.reference(p, {"x": np.full(4, 2.0)})["y"], 2 * blob)


def test_dynamic_dims_resolved_from_data():
    p = load("dynamic")
    assert p.tensors["A"].shape == (None, 8) and p.tensors["Y"].shape == (None, 4)
    for rows in (1, 5):
        data = fuseflow.random_inputs(p, seed=rows, shapes={"A": (rows, 8)})
        assert fuseflow.reference(p, data)["Y"].shape == (rows, 4)
    shapes = fuseflow.ir.infer_shapes(p, {"A": (9, 8), "W": (8, 4)})
    assert shapes == {"A": (9, 8), "W": (8, 4), "Y": (9, 4)}


def test_text_source_names_and_overrides():
    text = (MLIR / "spmv.mlir").read_text()
    p = fuseflow.from_mlir(text)
    assert p.ops[0].loc == "<mlir>:8:8"
    assert p.name == "spmv" and p.inputs == ["A", "x"] and p.outputs == ["y"]
    q = fuseflow.from_mlir(str(MLIR / "spmv.mlir"), formats={"M": "compressed,compressed"},
                           arg_names=["M", "v"])
    assert q.inputs == ["M", "v"] and str(q.ops[0]) == "y(i) = sum[j] M(i,j) * v(j)"
    assert str(q.tensors["M"].format) == "compressed,compressed"


def test_ssa_names_numeric_and_multi_result():
    text = """
#id = affine_map<(d0) -> (d0)>
func.func @two(%0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %r:2 = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel"]}
      ins(%0, %arg1 : tensor<4xf32>, tensor<4xf32>) outs(%e, %e : tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o1: f32, %o2: f32):
    %s = arith.addf %a, %b : f32
    %d = arith.subf %a, %b : f32
    linalg.yield %s, %d : f32, f32
  } -> (tensor<4xf32>, tensor<4xf32>)
  return %r#1, %r#0 : tensor<4xf32>, tensor<4xf32>
}"""
    p = fuseflow.from_mlir(text)
    assert p.inputs == ["t0", "arg1"] and p.outputs == ["r_1", "r_0"]
    assert [str(op) for op in p.ops] == ["r_1(i) = t0(i) - arg1(i)", "r_0(i) = t0(i) + arg1(i)"]
    out = fuseflow.reference(p, {"t0": np.array([1.0, 2, 3, 4]), "arg1": np.ones(4)})
    np.testing.assert_array_equal(out["r_1"], [0.0, 1, 2, 3])
    np.testing.assert_array_equal(out["r_0"], [2.0, 3, 4, 5])


def test_returning_an_argument_makes_a_copy():
    text = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @ident(%A: tensor<3x3xf32, #CSR>) -> tensor<3x3xf32, #CSR> {
  return %A : tensor<3x3xf32, #CSR>
}"""
    p = fuseflow.from_mlir(text)
    assert p.outputs == ["A_out"] and str(p.ops[0]) == "A_out(i,j) = A(i,j)"
    a = np.arange(9.0).reshape(3, 3)
    np.testing.assert_array_equal(fuseflow.reference(p, {"A": sp.csr_matrix(a)})["A_out"], a)
