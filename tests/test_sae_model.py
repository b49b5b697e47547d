"""The built-in sparse autoencoder: weights generated sparse (seeded, never dense), the program
PyTorch's forward, small cases verified under every preset, and a million-feature case built in
memory that follows its nonzeros."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import fuseflow
from fuseflow.ir.canonicalize import prepare
from fuseflow.models.registry import build
from fuseflow.models.sae import SAE_SIZES, SparseAutoencoder, sparse_weight

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # "sparse CSR support is in beta"


def test_sparse_weight_is_seeded_bernoulli():
    W = sparse_weight(300, 500, 0.1, np.random.default_rng(4))
    again = sparse_weight(300, 500, 0.1, np.random.default_rng(4))
    other = sparse_weight(300, 500, 0.1, np.random.default_rng(5))
    assert (W != again).nnz == 0 and (W != other).nnz > 0
    assert W.has_canonical_format and W.dtype == np.float32
    assert abs(W.nnz / (300 * 500) - 0.1) < 0.005
    rows = np.diff(W.indptr)  # kept per row: binomial(500, 0.1), mean 50, sd 6.7
    assert 45 < rows.mean() < 55 and rows.std() > 3 and (W.indices < 500).all()
    assert (W.data != 0).all() and np.abs(W.data).max() <= 500 ** -0.5
    assert 0.4 < (W.data > 0).mean() < 0.6  # both signs
    assert sparse_weight(4, 6, 1.0, np.random.default_rng(0)).nnz == 24
    with pytest.raises(ValueError, match="density 0"):
        sparse_weight(4, 6, 0.0, np.random.default_rng(0))


def test_program_is_the_modules_forward():
    model = SparseAutoencoder(features=96, hidden=12, density=0.2, seed=3).eval()
    assert model.enc.weight.layout == torch.sparse_csr and not model.enc.weight.requires_grad
    X = np.random.default_rng(0).normal(size=(5, 96))
    program = prepare(fuseflow.from_torch(model, torch.tensor(X, dtype=torch.float32),
                                          formats={"enc.weight": "compressed,compressed"}))
    weight = program.constants["enc_weight"]
    assert sp.issparse(weight) and weight.nnz == model.enc.weight.values().numel()
    assert str(program.tensors["enc_weight"].format) == "compressed,compressed"
    assert str(program.tensors["dec_weight"].format) == "dense,compressed"  # the CSR layout's own
    [statement] = [str(op) for op in program.ops if "enc_weight" in op.tensors_read]
    assert statement.endswith("sum[k] X(i,k) * enc_weight(j,k)")
    with torch.no_grad():
        want = model(torch.tensor(X, dtype=torch.float32)).double().numpy()
    got = fuseflow.reference(program, {"X": X})[program.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)  # torch in float32


def test_cases_are_deterministic_per_seed():
    one, two, other = build("sae", "small"), build("sae", "small"), build("sae", "small", seed=1)
    for name in ("enc_weight", "dec_weight", "dec_bias"):
        a, b, c = (sp.csr_array(case.program.constants[name]) for case in (one, two, other))
        assert (a != b).nnz == 0 and (a != c).nnz > 0, name
    assert np.array_equal(one.inputs["X"], two.inputs["X"])


@pytest.mark.slow
def test_small_case_verifies_under_every_preset():
    case = build("sae", "small")
    cycles = {}
    for preset in ("unfused", "partial", "full"):
        run = fuseflow.simulate(case.program, case.presets[preset], case.inputs)
        assert run.verified, preset
        cycles[preset] = run.cycles
    assert cycles["full"] < cycles["unfused"]  # one pass over the weights instead of five kernels


BUILD_LARGE = """
import json, sys
import scipy.sparse as sp
from fuseflow.ir.canonicalize import prepare
from fuseflow.models.registry import build
case = build("sae", "nih-cxr", density=float(sys.argv[1]))
constants = case.program.constants
# this process's own peak (VmHWM): ru_maxrss can carry the forking test process's size over exec
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"maxrss_kb": hwm,
                  "sparse": {n: sp.issparse(v) for n, v in constants.items()},
                  "nnz": {n: int(v.nnz) for n, v in constants.items() if sp.issparse(v)},
                  "bytes": sum(int(a.nbytes) for v in constants.values()
                               for a in ((v.data, v.indices, v.indptr) if sp.issparse(v) else (v,))),
                  "shape": list(case.program.tensors["enc_weight"].shape)}))
"""


@pytest.mark.slow
def test_million_feature_case_builds_without_a_dense_weight():
    """NIH-CXR's shape (1,048,576 features, 512 hidden) at 0.1% density: a dense float32 weight
    alone would be 2 GiB, its float64 constant 4 GiB; the build stays far below either."""
    features, hidden = SAE_SIZES["nih-cxr"]
    done = subprocess.run([sys.executable, "-c", BUILD_LARGE, "0.001"], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["shape"] == [hidden, features]
    assert report["sparse"] == {"enc_weight": True, "enc_bias": False, "dec_weight": True, "dec_bias": False}
    expected = 0.001 * features * hidden
    assert all(abs(n - expected) < 0.02 * expected for n in report["nnz"].values())
    assert report["bytes"] < 64 * 2 ** 20  # the dense float64 weights: 8 GiB
    assert report["maxrss_kb"] < 1.5 * 2 ** 20  # KB: below a single dense float32 weight (2 GiB)
