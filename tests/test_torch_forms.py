"""PyTorch as people write it: torch.sparse ops, sparse tensors built in forward(), and PyTorch
Geometric's GCNConv/SAGEConv, rewritten on the FX graph before torch-mlir sees them."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import fuseflow
from fuseflow import NotSupported
from fuseflow.cli import main
from fuseflow.ir.canonicalize import prepare

FORMS = Path(__file__).parent / "torch_forms"
sys.path.insert(0, str(FORMS))
from sparse_ops import EdgeIndexMM, SparseMM, example_inputs  # noqa: E402


def _study(argv, capsys) -> str:
    code = main(["study", "fusion", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_torch_sparse_ops_run_through_study_fusion(capsys):
    out = _study([f"{FORMS / 'sparse_ops.py'}:SparseMM", "--input", "24x24:csr", "--input", "24x16"], capsys)
    assert "unfused" in out and "full" in out and "SparseMM" in out


def test_torch_sparse_ops_compute_what_pytorch_computes():
    torch.manual_seed(0)
    model = SparseMM().eval()
    A = (torch.rand(24, 24) < 0.2).float() * torch.rand(24, 24)
    X = torch.randn(24, 16)
    program = fuseflow.from_torch(model, A.to_sparse_csr(), X)
    assert all("sparse" not in str(op) for op in program.ops)
    result = fuseflow.simulate(program, "unfused", {"A": A.numpy(), "X": X.numpy()})
    want = model(A.to_sparse_csr(), X).detach().numpy()
    np.testing.assert_allclose(np.asarray(result.outputs[program.outputs[0]]), want, rtol=1e-4, atol=1e-6)


def test_a_sparse_tensor_built_in_forward_becomes_a_sparse_input_with_its_data():
    torch.manual_seed(0)
    model = EdgeIndexMM().eval()
    X, edge_index = example_inputs()
    program = fuseflow.from_torch(model, X, edge_index)
    (adjacency,) = [n for n in program.inputs if not program.tensors[n].format.is_dense and n != "X"]
    assert "edge_index" not in program.inputs and adjacency in program.constants
    result = fuseflow.simulate(program, "full", {"X": X.numpy()})
    np.testing.assert_allclose(np.asarray(result.outputs[program.outputs[0]]), model(X, edge_index).detach().numpy(),
                               rtol=1e-4, atol=1e-6)


def test_a_torch_sparse_op_without_a_form_is_named_with_the_form_that_works():
    class Softmax(torch.nn.Module):
        def forward(self, A):
            return torch.sparse.softmax(A, 1)

    with pytest.raises(NotSupported, match=r"torch.sparse.softmax .*fix: write it as torch.softmax\(S.masked_fill"):
        fuseflow.from_torch(Softmax(), torch.eye(4).to_sparse_csr())


pyg = pytest.importorskip("torch_geometric")
from pyg_layers import PygGCN, PygSAGE  # noqa: E402


def test_pyg_layers_run_through_study_fusion(capsys):
    out = _study([f"{FORMS / 'pyg_layers.py'}:PygGCN", "--input", "34x34", "--input", "34x34:csr"], capsys)
    assert "PygGCN" in out and "full" in out
    out = _study([f"{FORMS / 'pyg_layers.py'}:PygSAGE", "--init", '{"aggr": "mean"}', "--input", "34x34",
                  "--input", "34x34:csr"], capsys)
    assert "PygSAGE" in out


@pytest.mark.parametrize(("layer", "options"), [("GCNConv", {}), ("GCNConv", {"normalize": True}),
                                                ("SAGEConv", {"aggr": "mean"}), ("SAGEConv", {"aggr": "sum"})])
def test_pyg_layers_compute_what_pyg_computes(layer, options):
    torch.manual_seed(0)
    model = (PygGCN(12, 8, 3, **options) if layer == "GCNConv" else PygSAGE(12, 8, 3, **options)).eval()
    edges = torch.tensor([[0, 1, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9], [1, 0, 2, 3, 4, 3, 0, 0, 7, 8, 9, 6]])
    x = torch.randn(10, 12)
    for graph in (edges, torch.sparse_coo_tensor(edges.flip(0), torch.ones(12), (10, 10)).coalesce().to_sparse_csr()):
        program = fuseflow.from_torch(model, x, graph)
        result = fuseflow.simulate(program, "unfused", {"x": x.numpy()})
        np.testing.assert_allclose(np.asarray(result.outputs[program.outputs[0]]),
                                   model(x, graph).detach().numpy(), rtol=1e-4, atol=1e-6)


def _pyg_like_builtin(name: str, case):
    """A PyG model carrying the built-in model's weights, and its program in the built-in's formats."""
    constants = case.program.constants
    if name == "gcn":
        model = PygGCN(34, 16, 2).eval()
        pairs = {"conv1.lin.weight": "layer1_weight", "conv1.bias": "layer1_bias",
                 "conv2.lin.weight": "layer2_weight", "conv2.bias": "layer2_bias"}
    else:
        model = PygSAGE(34, 16, 2).eval()
        pairs = {f"layer{k}.{mine}": f"layer{k}_{theirs}" for k in (1, 2) for mine, theirs in
                 (("lin_l.weight", "neigh_lin_weight"), ("lin_l.bias", "neigh_lin_bias"),
                  ("lin_r.weight", "self_lin_weight"))}
    with torch.no_grad():
        for mine, theirs in pairs.items():
            value = constants[theirs]
            model.get_parameter(mine).copy_(torch.tensor(value.toarray() if hasattr(value, "toarray") else value))
    A = case.inputs["A"]
    adjacency = torch.sparse_csr_tensor(torch.tensor(A.indptr), torch.tensor(A.indices),
                                        torch.tensor(A.data, dtype=torch.float32), size=A.shape)
    weights = {m.replace(".", "_"): "compressed,compressed;order=1,0" for m in pairs if m.endswith("weight")}
    program = fuseflow.from_torch(model, torch.tensor(case.inputs["X"], dtype=torch.float32), adjacency,
                                  formats={"edge_index_adj": "compressed,compressed", **weights})
    return prepare(program)


@pytest.mark.parametrize("name", ["gcn", "graphsage"])
def test_pyg_models_match_the_built_in_models_on_karate(name):
    case = fuseflow.model(name, dataset="karate")
    if name == "graphsage":  # PyG's SAGEConv has no bias on the root term: the built-in's is zeroed
        for k in (1, 2):
            bias = f"layer{k}_self_lin_bias"
            case.program.constants[bias] = np.zeros_like(case.program.constants[bias])
    program = _pyg_like_builtin(name, case)
    for schedule in ("unfused", "full"):
        builtin = fuseflow.simulate(case.program, schedule, case.inputs)
        mine = fuseflow.simulate(program, schedule, {"x": case.inputs["X"]})
        np.testing.assert_allclose(np.asarray(mine.outputs[program.outputs[0]]),
                                   np.asarray(builtin.outputs[case.program.outputs[0]]), rtol=1e-5, atol=1e-7)
        if name == "gcn":
            assert mine.cycles == builtin.cycles, schedule
