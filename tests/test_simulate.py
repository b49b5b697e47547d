"""simulate(): verification, metrics, memory model, bounded channels, and the CLI."""
import json
import os
import time

import numpy as np
import pytest

import fuseflow
from fuseflow.cli import main
from fuseflow.fusion.compile import compile_schedule
from fuseflow.ir.formats import TensorFormat
from fuseflow.pipeline import first_mismatch, simulate
from fuseflow.sam.graph import SamGraph
from fuseflow.sim.bounded import Deadlock, bounded_cycles
from fuseflow.sim.hw import HwConfig
from fuseflow.sim.oracle import run_graph
from fuseflow.sim.storage import StoredTensor

MLIR = os.path.join(os.path.dirname(__file__), "mlir")


def stored(graph, data):
    return {n: StoredTensor.from_dense(data[m.stores(n)], TensorFormat.of(m))
            for n, m in graph.tensors.items() if m.role == "input"}


def test_simulate_verifies_and_counts():
    p = fuseflow.from_mlir(os.path.join(MLIR, "spmv.mlir"))
    data = fuseflow.random_inputs(p, density=0.2, seed=4)
    r = simulate(p, "full", data, engine="oracle")
    A = data["A"]
    nnz = int((A != 0).sum())
    assert r.verified and r.max_abs_error < 1e-12
    # one multiply per stored A entry (x is dense) and one reduction step per product
    assert r.flops == 2 * nnz
    # CSR scan of A: 2 segment reads per row + 1 coordinate read per entry; one value read of A
    # and of x per product
    assert r.mem_reads == 2 * A.shape[0] + nnz + 2 * nnz
    # y is written dense: its values only
    assert r.mem_writes == A.shape[0]
    assert np.allclose(r.outputs["y"], A @ data["x"])


def test_first_mismatch_names_coordinate():
    got, want = np.zeros((2, 3)), np.zeros((2, 3))
    got[1, 2] = 5
    assert first_mismatch("T", got, want, 1e-6, 1e-9) == \
        "simulated T differs from the reference at (1, 2): 5 vs 0"
    assert first_mismatch("T", want, want, 1e-6, 1e-9) is None


def test_comparison_in_blocks_finds_the_first_difference_and_the_largest_error(monkeypatch):
    """Compared a few entries at a time (as a million-entry output is): the first entry beyond
    the tolerances and the largest finite error over all blocks, dense and sparse alike."""
    import scipy.sparse as sp

    from fuseflow import pipeline

    monkeypatch.setattr(pipeline, "COMPARE_BLOCK", 4)
    want = np.arange(1.0, 31.0).reshape(5, 6)
    got = want.copy()
    got[2, 3] += 0.5  # flat entry 15, in the fourth block
    got[4, 5] += 2.0  # the largest error, in the last block
    got[0, 1] = np.inf  # not finite: no error, but a difference (and the first one)
    assert pipeline.compare("T", got, want, 1e-6, 1e-9) == \
        (2.0, "simulated T differs from the reference at (0, 1): inf vs 2")
    got[0, 1] = want[0, 1]
    assert pipeline.compare("T", got, want, 1e-6, 1e-9)[1].endswith("at (2, 3): 16.5 vs 16")
    sparse_want = sp.csr_array(np.where(want > 10, want, 0.0))
    sparse_got = sp.csr_array(np.where(got > 10, got, 0.0))
    assert pipeline.compare("T", sparse_got, sparse_want, 1e-6, 1e-9) == \
        (2.0, "simulated T differs from the reference at (2, 3): 16.5 vs 16")
    assert pipeline.compare("T", want, want, 1e-6, 1e-9) == (0.0, None)


def test_memory_model_stalls():
    hw = HwConfig(hbm=True)
    # 8 channels: words 0..7 fill the first batch (latency 2) and the first access pays start-up 14
    assert hw.memory_stall(0, 8) == 14 + 2
    assert hw.memory_stall(8, 3) == 0 and hw.memory_stall(11, 5) == 2
    assert hw.final_stall(13) == 2 and hw.final_stall(16) == 0
    assert HwConfig().memory_stall(0, 100) == 0


def test_memory_model_slows_a_memory_bound_kernel():
    """A chain root -> compressed scan -> writer: every step reads memory, so the run takes longer."""
    g = SamGraph("scan")
    root = g.add("root")
    scan = g.add("scan", {"tensor": "A", "level": 0, "format": "compressed", "dim": 64}, ref=root.out("ref"))
    g.add("level_write", {"tensor": "o", "level": 0, "format": "compressed", "dim": 64}, crd=scan.out("crd"))
    data = np.zeros(64)
    data[::2] = 1.0
    tensors = {"A": StoredTensor.from_dense(data, fuseflow.TensorFormat.parse("compressed"))}
    plain = run_graph(g, tensors).cycles
    slow = run_graph(g, tensors, HwConfig(hbm=True)).cycles
    # the scan reads 2 segment words + 32 coordinates = 34 words: start-up 14, 4 full batches of 8
    # and a final partial batch, each 2 cycles; the writer writes 32 crd + 1 seg = 33 words:
    # start-up 14, 4 batches and a partial one. Writer stalls overlap the scan's, so the total
    # grows by at least the scan's own stall.
    assert slow - plain >= 14 + 5 * 2


def test_bounded_channels_deadlock_is_reported_quickly():
    p = fuseflow.from_mlir(os.path.join(MLIR, "softmax_sparse.mlir"))
    data = fuseflow.random_inputs(p, density=0.3, seed=1)
    graph = compile_schedule(p, "full").kernels[0].graph
    tensors = stored(graph, data)
    unbounded = run_graph(graph, tensors)
    deep = max(unbounded.max_occupancy.values())
    # channels as deep as the deepest occupancy change nothing
    assert bounded_cycles(graph, tensors, deep) == unbounded.cycles
    start = time.perf_counter()
    with pytest.raises(Deadlock) as info:
        bounded_cycles(graph, tensors, 2)
    assert time.perf_counter() - start < 5
    err = info.value
    assert err.full and err.blocked and "deadlock at cycle" in str(err) and "\n" not in str(err)


def test_occupancy_of_softmax_buffers_a_row():
    """The subtract waits for the row max: some channel holds at least a whole row of the matrix."""
    p = fuseflow.from_mlir(os.path.join(MLIR, "softmax_sparse.mlir"))
    r = simulate(p, "full", seed=2, density=0.3, engine="oracle")
    row = p.tensors[p.inputs[0]].shape[1]
    assert r.max_occupancy >= row


def test_cli_simulate_json_inputs_and_outputs(tmp_path, capsys):
    A = np.eye(64, 48)
    x = np.arange(48, dtype=float)
    np.savez(tmp_path / "in.npz", arg0=A, arg1=x)
    code = main(["simulate", os.path.join(MLIR, "spmv.mlir"), "--inputs", str(tmp_path / "in.npz"),
                 "--save-outputs", str(tmp_path / "out.npz"), "--json", "--engine", "oracle"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("cycles", "verified", "max_abs_error", "flops", "mem_reads", "mem_writes", "kernels"):
        assert key in data
    assert data["verified"] and data["flops"] == 2 * 48
    assert np.allclose(np.load(tmp_path / "out.npz")["out0"], A @ x)


def test_cli_simulate_errors(tmp_path, capsys):
    np.savez(tmp_path / "bad.npz", arg7=np.ones(3))
    assert main(["simulate", os.path.join(MLIR, "spmv.mlir"), "--inputs", str(tmp_path / "bad.npz")]) == 2
    assert "holds 'arg7'" in capsys.readouterr().err
    assert main(["simulate", os.path.join(MLIR, "softmax_sparse.mlir"), "--depth", "2", "--engine", "oracle"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fuseflow: error: deadlock at cycle") and err.count("\n") == 1
    np.savez(tmp_path / "shape.npz", arg0=np.ones((3, 3)))
    assert main(["simulate", os.path.join(MLIR, "spmv.mlir"), "--inputs", str(tmp_path / "shape.npz")]) == 2
    assert "has shape (3, 3)" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [[], ["--sample", "0.5"]])
def test_numba_jit_disabled_simulates_on_the_oracle(extra):
    """Issue #40: NUMBA_DISABLE_JIT=1 (read when numba loads: a process of its own) runs the fast
    engine's work on the oracle, said in one note, with the same cycles."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "fuseflow", "simulate", os.path.join(MLIR, "spmv.mlir"), "--json", *extra]
    runs = [subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "NUMBA_DISABLE_JIT": jit})
            for jit in ("1", "0")]
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert "NUMBA_DISABLE_JIT is set" in runs[0].stderr and "NUMBA_DISABLE_JIT" not in runs[1].stderr
    assert runs[0].stderr.count("fuseflow: note: NUMBA_DISABLE_JIT") == 1
    oracle, fast = (json.loads(run.stdout) for run in runs)
    assert oracle["verified"] and oracle["cycles"] == fast["cycles"]
