"""Admission before allocating: requests whose size (read from shapes, headers, pickles or a
search space) exceeds the memory budget are refused in one line before anything large is built."""
from __future__ import annotations

import json
import pickle
import time
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import error_of

import fuseflow
from fuseflow import UserError
from fuseflow.cli import main
from fuseflow.data import load_planetoid
from fuseflow.data.inputs import read_inputs
from fuseflow.memory import Budget, resident_bytes

MLIR = Path(__file__).parent / "mlir"
SPMV = str(MLIR / "spmv.mlir")
CHAIN = str(MLIR / "matmul_chain.mlir")  # T = A(20x30) B(30x10), O = T C(10x25)


def budget_of(extra: int) -> Budget:
    """A budget that leaves `extra` bytes above what this process holds now."""
    return Budget(resident_bytes() + extra)


def timed(argv, capsys, seconds: float = 20.0) -> str:
    start = time.perf_counter()
    err = error_of(argv, capsys)
    assert time.perf_counter() - start < seconds, "refused, but only after the work"
    return err


def test_a_huge_csr_input_is_refused_before_generating_it(tmp_path, capsys):
    big = tmp_path / "big.mlir"
    big.write_text(Path(SPMV).read_text().replace("64x48", "100000x100000")
                   .replace("tensor<48xf32>", "tensor<100000xf32>").replace("tensor<64xf32>", "tensor<100000xf32>"))
    # A is generated sparse (10^10 positions at density 0.1: 10^9 entries of 24 bytes, 22.4 GiB);
    # x and y are 10^5 dense elements
    err = timed(["--max-memory", "8G", "simulate", str(big)], capsys)
    assert "inputs of spmv: needs about 22.4 GiB more, and the limit of 8.0 GiB leaves" in err
    with pytest.raises(fuseflow.MemoryLimitError, match="needs about 2.2 GiB more"):
        fuseflow.simulate(fuseflow.from_mlir(big), "full", density=0.01, budget=budget_of(2**30))


def test_a_huge_gpu_chain_is_refused_before_the_search(capsys):
    err = timed(["gpu", "plan", "--chain", "ffn:100000000,100000000,100000000,100000000"], capsys, 5.0)
    assert "plan search of ffn:100000000,100000000,100000000,100000000 (4,100,625 tile combinations)" in err


def test_par_factors_beyond_their_loop(capsys):
    assert "no loop of matmul_chain has more than 30 iterations" in \
        timed(["simulate", CHAIN, "--schedule", "full par=i:1000000"], capsys, 10.0)
    assert "loop i of group 0 has only 20 iterations (fix: use at most par=i:20)" in \
        timed(["compile", CHAIN, "--schedule", "full par=i:25"], capsys, 10.0)
    assert main(["compile", CHAIN, "--schedule", "full par=i:20"]) == 0  # the whole extent is fine


def test_par_factors_in_a_study_and_a_sweep(tmp_path, capsys):
    err = timed(["study", "fusion", CHAIN, "--schedule", "full par=i:1000000"], capsys, 20.0)
    assert "deals 1000000 lanes" in err
    db = str(tmp_path / "s.db")
    start = time.perf_counter()
    assert main(["sweep", CHAIN, "-g", "full", "--par", "i:1000000", "--db", db, "-q"]) == 0
    assert time.perf_counter() - start < 20
    import sqlite3

    rows = sqlite3.connect(db).execute("SELECT status, error FROM runs").fetchall()
    assert rows == [("error", rows[0][1])] and "deals 1000000 lanes" in rows[0][1]


def test_the_study_checks_its_baseline_against_max_tokens(capsys):
    assert main(["study", "fusion", "--model", "gcn", "--dataset", "karate", "--max-tokens", "10",
                 "--schedules", "unfused,partial", "--json"]) == 0  # even a sample would pass 4x 10 token events
    rows = json.loads(capsys.readouterr().out)
    assert [r["verified"] for r in rows] == ["skipped", "skipped"]  # the baseline too
    assert rows[0]["speedup"] == 1.0 and rows[1]["estimated_ratios"] and rows[1]["speedup"] > 1


def test_an_archive_that_inflates_beyond_the_budget(tmp_path):
    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, A=np.zeros((2048, 4096)))  # 64 MiB of zeros in about 64 KiB
    assert path.stat().st_size < 1_000_000
    program = fuseflow.from_mlir(SPMV)
    with pytest.raises(fuseflow.MemoryLimitError, match="needs about 128.0 MiB more"):
        read_inputs(path, program, "--inputs", budget_of(16 * 2**20))  # 64 MiB read + a float64 copy


def test_an_npy_header_asking_for_petabytes(tmp_path, capsys):
    path = tmp_path / "A.npy"
    with open(path, "wb") as handle:
        np.lib.format.write_array_header_1_0(handle, {"descr": "<f8", "fortran_order": False, "shape": (2**53,)})
    assert path.stat().st_size < 300
    err = error_of(["simulate", SPMV, "--inputs", str(path)], capsys)
    assert "declares (9007199254740992,) float64 but the file holds only 0 bytes" in err


def test_planetoid_shared_lists_are_counted_before_building(tmp_path):
    from test_data import write_planetoid

    shared = [k % 10 for k in range(100_000)]  # one list, pickled once, listed under every node
    write_planetoid(tmp_path)
    graph = {k: shared for k in range(10)}
    (tmp_path / "ind.tiny.graph").write_bytes(pickle.dumps(graph, protocol=2))
    assert (tmp_path / "ind.tiny.graph").stat().st_size < 400_000
    with pytest.raises(fuseflow.MemoryLimitError, match="1,000,000 adjacency entries"):
        load_planetoid(tmp_path, "tiny", budget=budget_of(8 * 2**20))


def test_planetoid_test_index_far_beyond_the_graph(tmp_path):
    from test_data import write_planetoid

    write_planetoid(tmp_path)
    (tmp_path / "ind.tiny.test.index").write_text("8\n6\n99999999999999\n")
    with pytest.raises(UserError, match="largest test index 99,999,999,999,999"):
        load_planetoid(tmp_path, "tiny")


def test_max_memory_reaches_a_simulator_that_takes_a_budget(monkeypatch, capsys):
    import fuseflow.pipeline as pipeline

    real, seen = pipeline.run_request, []

    def with_budget(request, **options):
        seen.append(request.budget)
        return real(request, **options)

    monkeypatch.setattr(pipeline, "run_request", with_budget)
    assert main(["--max-memory", "100G", "simulate", SPMV]) == 0
    assert len(seen) == 1 and seen[0].limit == 100 * 2**30
    assert main(["simulate", SPMV]) == 0 and seen[1] is None  # no flag: the simulator's own default


def test_a_synthetic_graph_beyond_memory(capsys):
    err = timed(["study", "fusion", "--model", "gcn", "--dataset", "synthetic:mag", "--scale", "1000"], capsys, 10.0)
    assert "synthetic:mag at scale 1000 (736,389,000 nodes" in err


def test_inputs_slow_to_generate_are_announced_first_with_their_size(monkeypatch, capsys):
    """Issue #40: `--shape '?=100000000'` (6 GiB of generated inputs, within a large budget) said
    nothing for minutes; inputs that take more than a few seconds to generate are now announced
    on stderr, before they are generated, with their size."""
    from fuseflow import checks

    dynamic = str(MLIR / "dynamic.mlir")
    program = fuseflow.from_mlir(dynamic)
    assert checks.generation_note(program, {}, {"A": (10**8, 8), "W": (8, 4)}) == \
        "generating 6.0 GiB of inputs (A: 100000000x8 dense), which takes a while"
    assert checks.generation_note(program, {}, {"A": (64, 8), "W": (8, 4)}) is None
    assert main(["simulate", dynamic, "--shape", "?=64", "--json"]) == 0
    assert "generating" not in capsys.readouterr().err
    monkeypatch.setattr(checks, "SLOW_SECONDS", 0.0)  # as if these were slow
    assert main(["simulate", dynamic, "--shape", "?=64", "--json"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("fuseflow: note: generating 4.2 KiB of inputs (A: 64x8 dense, W: 8x4 sparse), "
                          "which takes a while\n"), err
