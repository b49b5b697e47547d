"""fuseflow.from_torch on small models: structure of the imported Program, and
its numpy reference result against PyTorch eager (float64 and float32)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import fuseflow  # noqa: E402
from fuseflow import NotSupported, TensorFormat, UserError  # noqa: E402
from fuseflow.ir import In, IndexOp  # noqa: E402
from fuseflow.ir.expr import product_factors  # noqa: E402

from torch_models import (  # noqa: E402
    GCN,
    DataDependent,
    FeedForward,
    GraphSAGE,
    LayerNormModel,
    MaskedAttention,
    Scale,
    SparseAutoencoder,
)

DTYPES = [np.float64, np.float32]
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # "sparse CSR support is in beta"


def import_model(module, *inputs, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fuseflow.from_torch(module, *inputs, **kwargs)


def eager(module, *inputs) -> np.ndarray:
    with torch.no_grad():
        return module(*inputs).double().numpy()


def run(program, inputs, dtype) -> np.ndarray:
    """The single output of the reference evaluation, with the example inputs bound by position."""
    data = dict(zip(program.inputs, inputs))
    outputs = fuseflow.reference(program, data, dtype=dtype)
    assert list(outputs) == program.outputs and len(outputs) == 1
    (result,) = outputs.values()
    assert result.dtype == dtype
    return result


def assert_close(got, want, rtol=1e-5):
    """Relative to each value, with an absolute floor relative to the largest value."""
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * float(np.abs(want).max()))


def is_product(op: IndexOp) -> bool:
    """The body is `In(0) * In(1)` (times constants): a contraction's multiply."""
    return [f for f in (product_factors(op.body) or []) if isinstance(f, In)] == [In(0), In(1)]


def random_adjacency(n: int, density: float = 0.25) -> "torch.Tensor":
    mask = (torch.rand(n, n) < density).float()
    mask += torch.eye(n)  # self loops: no empty rows
    return mask.clamp(max=1) * torch.rand(n, n)


# -- 1. GCN ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gcn():
    torch.manual_seed(0)
    model = GCN(features=6, hidden=8, classes=3).eval()
    A, X = random_adjacency(12), torch.randn(12, 6)
    program = import_model(model, A.to_sparse_csr(), X)
    return model, program, A, X


def test_gcn_inputs_and_formats(gcn):
    model, p, A, X = gcn
    assert p.inputs == ["A", "X", "l1_weight", "l1_bias", "l2_weight", "l2_bias"]
    assert str(p.tensors["A"].format) == "dense,compressed"
    assert p.tensors["A"].shape == (12, 12)
    assert p.tensors["X"].format.is_dense
    assert set(p.constants) == {"l1_weight", "l1_bias", "l2_weight", "l2_bias"}
    np.testing.assert_array_equal(p.constants["l1_weight"], model.l1.weight.detach().double().numpy())


def test_gcn_has_two_spmms(gcn):
    _, p, _, _ = gcn
    spmms = [op for op in p.ops if isinstance(op, IndexOp) and op.reduce_kind == "sum"
             and op.inputs and op.inputs[0].tensor == "A" and is_product(op)]
    assert len(spmms) == 2
    for op in spmms:
        (k,) = op.reduce_vars
        assert op.inputs[0].indices == (op.output.indices[0], k)  # A(i,k) * _(k,j)
        assert op.inputs[1].indices == (k, op.output.indices[1])
    assert spmms[0].inputs[1].tensor == "X"  # A @ X first, then A @ H
    assert spmms[1].inputs[1].tensor != "X"
    # the softmax at the end: a max reduction and an exp
    assert any(isinstance(op, IndexOp) and op.reduce_kind == "max" for op in p.ops)
    assert "exp(" in "\n".join(str(op) for op in p.ops)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gcn_matches_eager(gcn, dtype):
    model, p, A, X = gcn
    want = eager(model, A.to_sparse_csr(), X)  # eager runs the real CSR SpMM
    assert_close(want, eager(model, A, X))
    got = run(p, [A, X], dtype)
    assert_close(got, want)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-6)  # softmax rows


def test_gcn_reference_accepts_sparse_torch_data(gcn):
    model, p, A, X = gcn
    got = run(p, [A.to_sparse_csr(), X], np.float64)
    assert_close(got, eager(model, A, X))


# -- 2. GraphSAGE --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sage():
    torch.manual_seed(1)
    model = GraphSAGE(features=6, hidden=8, out=4).eval()
    A, X = random_adjacency(16), torch.randn(16, 6)
    return model, import_model(model, A.to_sparse_csr(), X), A, X


@pytest.mark.parametrize("dtype", DTYPES)
def test_graphsage_matches_eager(dtype, sage):
    model, p, A, X = sage
    got = run(p, [A, X], dtype)
    want = eager(model, A.to_sparse_csr(), X)
    assert_close(got, want)
    assert (got >= 0).all() and (got > 0).any()  # final ReLU, not all zero


def test_graphsage_structure(sage):
    _, p, _, _ = sage
    assert str(p.tensors["A"].format) == "dense,compressed"
    assert p.inputs[:2] == ["A", "X"]
    assert "layer2_neigh_lin_weight" in p.inputs and "layer1_self_lin_bias" in p.constants
    aggregations = [op for op in p.ops if isinstance(op, IndexOp) and op.reduce_kind == "sum"
                    and op.inputs and op.inputs[0].tensor == "A" and is_product(op)]
    assert len(aggregations) == 2  # one A @ H per layer


# -- 3. sparse autoencoder -----------------------------------------------------------------------------

AE_FORMATS = {"enc.weight": "compressed,compressed", "dec.weight": "dense,compressed"}


@pytest.fixture(scope="module")
def autoencoder():
    torch.manual_seed(2)
    model = SparseAutoencoder(features=20, code=10, zero_fraction=0.9).eval()
    X = torch.randn(6, 20)
    return model, import_model(model, X, formats=AE_FORMATS), X


def test_autoencoder_weights_are_sparse(autoencoder):
    model, p, _ = autoencoder
    for name in ("enc_weight", "dec_weight"):
        zeros = float((p.constants[name] == 0).mean())
        assert 0.8 < zeros < 1.0, (name, zeros)
    np.testing.assert_array_equal(p.constants["dec_weight"], model.dec.weight.detach().double().numpy())


def test_autoencoder_declared_formats(autoencoder):
    _, p, _ = autoencoder
    assert p.inputs == ["X", "enc_weight", "enc_bias", "dec_weight", "dec_bias"]
    assert p.tensors["enc_weight"].format == TensorFormat.parse("compressed,compressed")
    assert p.tensors["dec_weight"].format == TensorFormat.parse("dense,compressed")
    assert p.tensors["enc_bias"].format.is_dense and p.tensors["X"].format.is_dense


@pytest.mark.parametrize("dtype", DTYPES)
def test_autoencoder_matches_eager(autoencoder, dtype):
    model, p, X = autoencoder
    assert_close(run(p, [X], dtype), eager(model, X))


def test_autoencoder_with_other_weights(autoencoder):
    """The weights are ordinary inputs: data passed by name replaces the constants."""
    model, p, X = autoencoder
    torch.manual_seed(3)
    other = SparseAutoencoder(features=20, code=10).eval()
    data = {"X": X, **{k.replace(".", "_"): v.detach() for k, v in other.state_dict().items()}}
    got = fuseflow.reference(p, data)[p.outputs[0]]
    assert_close(got, eager(other, X))
    assert not np.allclose(got, eager(model, X))


# -- 4. block-sparse masked attention ------------------------------------------------------------------

def block_mask(n=64, block=16, density=0.5):
    grid = (torch.rand(n // block, n // block) < density).float()
    grid += torch.eye(n // block)  # every query row keeps its diagonal block
    grid = grid.clamp(max=1)
    return grid.repeat_interleave(block, 0).repeat_interleave(block, 1)


@pytest.fixture(scope="module")
def attention():
    torch.manual_seed(4)
    d = 8
    model = MaskedAttention(scale=1 / math.sqrt(d)).eval()
    M = block_mask()
    Q, K, V = (torch.randn(64, d) for _ in range(3))
    return model, import_model(model, M.to_sparse_bsr((16, 16)), Q, K, V), (M, Q, K, V)


@pytest.fixture(scope="module")
def multihead():
    torch.manual_seed(5)
    h, d = 2, 8
    model = MaskedAttention(scale=1 / math.sqrt(d)).eval()
    M = block_mask()
    Q, K, V = (torch.randn(h, 64, d) for _ in range(3))
    return model, import_model(model, M.to_sparse_bsr((16, 16)), Q, K, V), (M, Q, K, V)


def test_attention_mask_is_block_sparse(attention):
    _, p, (M, *_) = attention
    fmt = p.tensors["M"].format
    assert fmt.block == (16, 16)
    assert str(fmt) == "dense,compressed;block=16x16"
    assert p.inputs == ["M", "Q", "K", "V"] and not p.constants
    masking = [op for op in p.ops if isinstance(op, IndexOp) and not op.reduce_vars
               and any(a.tensor == "M" for a in op.inputs)]
    assert len(masking) == 1 and is_product(masking[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_matches_eager(attention, dtype):
    model, p, inputs = attention
    # eager PyTorch has no BSR * dense kernel: the eager side uses the dense mask
    assert_close(run(p, inputs, dtype), eager(model, *inputs))


def test_multihead_mask_broadcasts(multihead):
    _, p, _ = multihead
    assert p.tensors["M"].format.block == (16, 16)
    assert p.tensors["Q"].shape == (2, 64, 8)
    (masking,) = [op for op in p.ops if isinstance(op, IndexOp) and any(a.tensor == "M" for a in op.inputs)]
    m_access = next(a for a in masking.inputs if a.tensor == "M")
    assert len(masking.output.indices) == 3 and len(m_access.indices) == 2
    assert m_access.indices == masking.output.indices[1:]  # M(j,k) against scores(h,j,k)


@pytest.mark.parametrize("dtype", DTYPES)
def test_multihead_matches_eager(multihead, dtype):
    model, p, inputs = multihead
    got = run(p, inputs, dtype)
    assert got.shape == (2, 64, 8)
    assert_close(got, eager(model, *inputs))


# -- 5. LayerNorm ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def layernorm():
    torch.manual_seed(6)
    model = LayerNormModel(8).eval()
    x = torch.randn(5, 8) * 3 + 1
    return model, import_model(model, x), x


def test_layernorm_structure(layernorm):
    model, p, _ = layernorm
    assert p.inputs == ["x", "norm_weight", "norm_bias"]
    np.testing.assert_array_equal(p.constants["norm_weight"], model.norm.weight.detach().double().numpy())
    assert "rsqrt(" in "\n".join(str(op) for op in p.ops)
    sums = [op for op in p.ops if isinstance(op, IndexOp) and op.reduce_kind == "sum"]
    assert len(sums) >= 2  # mean and variance over the last dimension


@pytest.mark.parametrize("dtype", DTYPES)
def test_layernorm_matches_eager(layernorm, dtype):
    model, p, x = layernorm
    got = run(p, [x], dtype)
    assert_close(got, eager(model, x))
    normalised = (got - model.norm.bias.detach().numpy()) / model.norm.weight.detach().numpy()
    np.testing.assert_allclose(normalised.mean(axis=1), 0, atol=1e-5)


# -- 6. GELU feed-forward -----------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["none", "tanh"])
def feedforward(request):
    torch.manual_seed(7)
    model = FeedForward(8, 16, approximate=request.param).eval()
    x = torch.randn(5, 8) * 2
    return request.param, model, import_model(model, x), x


def test_feedforward_activation(feedforward):
    approximate, _, p, _ = feedforward
    text = "\n".join(str(op) for op in p.ops)
    if approximate == "none":
        assert "erf(" in text and "tanh(" not in text
    else:
        assert "tanh(" in text and "erf(" not in text
        # 0.044715 * x**3 arrives as math.fpowi, expanded to a product x * x * x
        (gelu,) = [op for op in p.ops if "tanh(" in str(op)]
        assert len(gelu.inputs) == 1
        x = str(gelu.inputs[0])
        assert f"{x} * {x} * {x}" in str(gelu), str(gelu)


@pytest.mark.parametrize("dtype", DTYPES)
def test_feedforward_matches_eager(feedforward, dtype):
    approximate, model, p, x = feedforward
    got = run(p, [x], dtype)
    want = eager(model, x)
    # torch-mlir lowers the tanh form with sqrt(2/pi) written as 0.797724 (not 0.7978846),
    # which moves results by ~2e-5 relative; the erf form is exact.
    assert_close(got, want, rtol=1e-5 if approximate == "none" else 1e-4)
    if approximate == "tanh":
        assert_close(got, _tanh_gelu_ffn(model, x, beta=0.797724), rtol=1e-5)


def _tanh_gelu_ffn(model, x, beta):
    sd = {k: v.detach().double().numpy() for k, v in model.state_dict().items()}
    h = x.double().numpy() @ sd["up.weight"].T + sd["up.bias"]
    h = 0.5 * h * (1 + np.tanh(beta * (h + 0.044715 * h ** 3)))
    return h @ sd["down.weight"].T + sd["down.bias"]


# -- names, formats, errors ---------------------------------------------------------------------------------

class _Named(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 3, bias=False)
        self.register_buffer("shift", torch.full((3,), 0.5))

    def forward(self, adjacency, node_features):
        return self.proj(adjacency @ node_features) + self.shift


class _VarArgs(torch.nn.Module):
    def forward(self, *xs):
        return xs[0] @ xs[1]


@pytest.fixture(scope="module")
def named():
    torch.manual_seed(8)
    model = _Named().eval()
    A, X = torch.rand(5, 5), torch.randn(5, 4)
    return model, import_model(model, A, X, formats={0: "compressed,compressed"}), A, X


def test_input_names_from_forward_signature(named):
    _, p, _, _ = named
    assert p.inputs == ["adjacency", "node_features", "proj_weight", "shift"]
    assert p.name == "_Named"
    assert set(p.constants) == {"proj_weight", "shift"}  # parameters and buffers
    np.testing.assert_array_equal(p.constants["shift"], np.full(3, 0.5))


def test_formats_keyed_by_index(named):
    model, p, A, X = named
    assert str(p.tensors["adjacency"].format) == "compressed,compressed"
    assert p.tensors["node_features"].format.is_dense
    assert_close(run(p, [A, X], np.float64), eager(model, A, X))


def test_varargs_forward_gets_positional_names():
    p = import_model(_VarArgs(), torch.rand(3, 4), torch.rand(4, 2), formats={1: "dense,compressed"})
    assert p.inputs == ["arg0", "arg1"]
    assert str(p.tensors["arg1"].format) == "dense,compressed"


def test_csc_and_coo_inputs_keep_their_layout():
    A = torch.eye(4) * 2
    p = import_model(_VarArgs(), A.to_sparse_csc(), A.to_sparse_coo(), name="csc_coo")
    assert p.name == "csc_coo"
    assert str(p.tensors["arg0"].format) == "dense,compressed;order=1,0"
    assert str(p.tensors["arg1"].format) == "compressed,compressed"
    np.testing.assert_allclose(run(p, [A, A], np.float64), (A @ A).numpy())


def test_format_index_out_of_range_is_user_error():
    with pytest.raises(UserError, match="example input 2"):
        import_model(_VarArgs(), torch.rand(3, 4), torch.rand(4, 2), formats={2: "dense,compressed"})


def test_format_for_unknown_name_is_user_error():
    with pytest.raises(UserError, match="not an input"):
        import_model(Scale(), torch.rand(3), torch.rand(3), formats={"weight": "compressed"})


def test_non_module_is_user_error():
    with pytest.raises(UserError, match="torch.nn.Module"):
        fuseflow.from_torch(lambda x: x * 2, torch.ones(3))


def test_non_tensor_input_is_user_error():
    with pytest.raises(UserError, match="example input 1 is a float"):
        fuseflow.from_torch(Scale(), torch.ones(3), 2.0)


def test_data_dependent_control_flow_is_not_supported():
    with pytest.raises(NotSupported) as info:
        import_model(DataDependent(), torch.randn(3))
    message = str(info.value)
    assert "\n" not in message
    assert "DataDependent" in message and "torch-mlir" in message
