"""Values that used to pass silently or end as internal errors: non-real dtypes, inputs given
twice, NaN and infinities, broken input archives, fractional node ids, and device files with
non-finite, zero or negative fields."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import error_of

import fuseflow
from fuseflow import UserError
from fuseflow.cli import main
from fuseflow.data import load_planetoid
from fuseflow.gpu.problem.device import device_from_dict, load_device

MLIR = Path(__file__).parent / "mlir"
SPMV = str(MLIR / "spmv.mlir")


def inputs_file(tmp_path, **arrays) -> str:
    path = tmp_path / "in.npz"
    np.savez(path, **arrays)
    return str(path)


@pytest.mark.parametrize("value, needle", [
    (np.ones((64, 48)) * (1 + 2j), "member A has dtype complex128; fuseflow reads real numbers only"),
    (np.full((64, 48), np.datetime64("2024-01-01")), "dtype datetime64[D]"),
    (np.full((64, 48), "x"), "has dtype <U1"),
    (np.zeros((64, 48), dtype=[("a", "f4"), ("b", "i4")]), "fuseflow reads real numbers only"),
    (np.full((64, 48), np.inf), "input A holds inf at (0, 0)"),
    (np.where(np.eye(64, 48) > 0, np.nan, 1.0), "input A holds nan at (0, 0)"),
    (np.ones((0, 48)), "input A is empty"),
])
def test_input_values_fuseflow_cannot_compute_on(value, needle, tmp_path, capsys):
    assert needle in error_of(["simulate", SPMV, "--inputs", inputs_file(tmp_path, A=value)], capsys)


def test_the_same_input_twice(tmp_path, capsys):
    err = error_of(["simulate", SPMV, "--inputs", inputs_file(tmp_path, arg0=np.eye(64, 48), A=np.eye(64, 48))],
                   capsys)
    assert "input A is given twice (as 'arg0' and 'A')" in err
    program = fuseflow.from_mlir(SPMV)
    with pytest.raises(UserError, match="given twice"):
        fuseflow.simulate(program, "full", {"arg0": np.eye(64, 48), "A": np.eye(64, 48)})


def test_the_api_refuses_what_the_cli_refuses():
    program = fuseflow.from_mlir(SPMV)
    with pytest.raises(UserError, match="complex128"):
        fuseflow.simulate(program, "full", {"A": np.eye(64, 48) * 1j})
    with pytest.raises(UserError, match="holds nan"):
        fuseflow.simulate(program, "full", {"x": np.full(48, np.nan)})
    with pytest.raises(UserError, match="seed -1 must be a non-negative integer"):
        fuseflow.simulate(program, "full", seed=-1)


def test_broken_input_archives(tmp_path, capsys):
    good = inputs_file(tmp_path, A=np.eye(64, 48))
    truncated = tmp_path / "cut.npz"
    truncated.write_bytes(Path(good).read_bytes()[:300])
    assert "not a readable .npz archive" in error_of(["simulate", SPMV, "--inputs", str(truncated)], capsys)
    import zipfile

    odd = tmp_path / "odd.npz"
    with zipfile.ZipFile(odd, "w") as archive:
        archive.writestr("A.npy", b"not an array at all")
    assert "member A is not a readable numpy array" in error_of(["simulate", SPMV, "--inputs", str(odd)], capsys)


def test_a_single_npy_is_the_input_of_its_name(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.arange(48.0))
    assert main(["simulate", SPMV, "--inputs", str(tmp_path / "x.npy"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verified"] is True


def test_planetoid_node_ids_must_be_whole(tmp_path):
    from test_data import write_planetoid

    write_planetoid(tmp_path, graph=defaultdict(list, {0: [1], 1: [1.5]}))
    with pytest.raises(UserError, match="holds 1.5, not a node id"):
        load_planetoid(tmp_path, "tiny")


@pytest.mark.parametrize("fields, needle", [
    ({"sms": float("inf")}, "device field 'sms' has a bad value inf"),
    ({"bw_global": -1.0}, "bw_global must be a finite positive number"),
    ({"bw_l2": 0}, "bw_l2 must be a finite positive number"),
    ({"bw_smem": float("nan")}, "bw_smem must be a finite positive number, got nan"),
    ({"peak_flops": 0}, "peak_flops must be a finite positive number"),
    ({"max_cluster": 32}, "max_cluster 32 exceeds the largest GPC (18 SMs)"),
    ({"bw_dsm": {"2": 0, "4": 1e12, "8": 1e12, "16": 1e12}}, "bw_dsm[2] = 0.0 must be a finite positive"),
    ({"gpc_sms": [66.5, 65.5], "sms": 132}, "a list of whole numbers"),
])
def test_device_fields_must_be_finite_and_positive(fields, needle):
    with pytest.raises(UserError) as info:
        device_from_dict(fields)
    assert needle in str(info.value)


def test_a_device_file_with_infinity(tmp_path, capsys):
    path = tmp_path / "inf.json"
    path.write_text('{"sms": Infinity}')
    with pytest.raises(UserError, match="bad value inf"):
        load_device(str(path))
    assert "bad value inf" in error_of(["gpu", "plan", "--chain", "G1", "--device", str(path)], capsys)


def test_graph_features_must_be_finite(tmp_path):
    from fuseflow.data import karate, load_graph, save_graph

    graph = karate()
    graph.features = graph.features.copy()
    graph.features[0, 0] = np.nan
    save_graph(graph, tmp_path / "g.npz")
    with pytest.raises(UserError, match="x_data holds NaN"):
        load_graph(tmp_path / "g.npz")
