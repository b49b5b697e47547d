"""One model vocabulary for every command: an .mlir file, a PyTorch class, a built-in model;
dynamic dimensions from --shape or --inputs; hints that name command-line flags."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import error_of

from fuseflow.cli import main
from fuseflow.models import registry
from fuseflow.models.resolve import BUILT_IN

MLIR = Path(__file__).parent / "mlir"


@pytest.fixture
def net() -> str:
    return str(Path(__file__).parent / "torch_models.py")


def forms(net: str) -> list[list[str]]:
    return [[str(MLIR / "spmv.mlir")],
            ["--torch", f"{net}:LinearRelu", "--input", "5x5:csr", "--input", "5x4"],
            [f"{net}:LinearRelu", "--input", "5x5:csr", "--input", "5x4"],
            ["--model", "gcn", "--dataset", "karate"],
            ["model:sae", "--dataset", "small"]]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["inspect", "orders", "compile", "simulate"])
def test_every_command_takes_every_model_form(command, net, capsys):
    for argv in forms(net):
        assert main([command, *argv, *(["--schedule", "partial"] if command != "inspect" else [])]) == 0, argv
        out = capsys.readouterr().out
        assert out.strip(), argv
        if command == "simulate":
            assert "outputs verified against the numpy reference" in out


def test_study_takes_every_model_form(net, capsys):
    for argv in forms(net)[:3]:
        assert main(["study", "fusion", *argv, "--schedules", "unfused,partial", "--json"]) == 0, argv
        rows = json.loads(capsys.readouterr().out)
        assert [r["verified"] for r in rows] == [True, True]


def test_a_model_preset_name_is_its_schedule(capsys):
    assert main(["compile", "--model", "gcn", "--schedule", "partial"]) == 0
    assert capsys.readouterr().out.count("kernel ") == 2  # one per layer, as the preset says


@pytest.mark.parametrize("argv, needle", [
    (["orders", "mymodel.py:Net"], "no such Python file: mymodel.py"),
    (["simulate", "missing.mlir"], "no such MLIR file 'missing.mlir'"),
    (["simulate", "model"], "no such file 'model' (fix: give an .mlir file, FILE.py:Class or model:NAME"),
    (["compile", "model:gnc"], "unknown model 'gnc'"),
    (["study", "fusion", "--model", "nope"], "unknown model 'nope'"),
    (["inspect"], "no model given (fix: give an .mlir file, --torch FILE.py:Class or --model NAME"),
    (["inspect", str(MLIR / "spmv.mlir"), "--model", "gcn"], "MODEL and --model both name a model"),
    (["simulate", str(MLIR / "spmv.mlir"), "--dataset", "cora"], "--inputs FILE.npz"),
    (["compile", "--model", "gcn", "--input", "3x3"], "--input does not apply"),
    (["inspect", str(MLIR)], "is a directory"),
])
def test_model_arguments_that_name_nothing(argv, needle, capsys):
    assert needle in error_of(argv, capsys)


def test_dynamic_dimensions_from_shape_flags(capsys, tmp_path):
    dynamic = str(MLIR / "dynamic.mlir")
    for command in ("compile", "orders", "simulate"):  # without --shape: the default size, said on stderr
        assert main([command, dynamic]) == 0
        assert "note: dynamic dimensions of A are 16" in capsys.readouterr().err
    assert main(["simulate", dynamic, "--shape", "A=16x8", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verified"] and result["flops"] > 0
    assert main(["study", "fusion", dynamic, "--shape", "A=16x8", "--schedules", "unfused"]) == 0
    assert "verified" in capsys.readouterr().out
    assert "--shape names 'B'" in error_of(["compile", dynamic, "--shape", "B=3x3"], capsys)


def test_dynamic_dimensions_from_input_data(capsys, tmp_path):
    data = tmp_path / "a.npz"
    np.savez(data, A=np.ones((12, 8)))
    assert main(["simulate", str(MLIR / "dynamic.mlir"), "--inputs", str(data), "--save-outputs",
                 str(tmp_path / "out.npz")]) == 0
    with np.load(tmp_path / "out.npz") as out:
        assert out["out0"].shape == (12, 4)


def test_the_data_directory_is_a_flag(capsys, tmp_path):
    err = error_of(["inspect", "--model", "gcn", "--dataset", "cora", "--data-dir", str(tmp_path)], capsys)
    assert "cora.npz not found" in err and "drop --data-dir" in err and "data_dir=" not in err


def test_help_lists_what_each_model_takes():
    for name in registry.MODELS:
        listed = BUILT_IN[name]
        if listed == "graph":
            assert registry.datasets_of(name)[:4] == ["karate", "cora", "citeseer", "cora_ml"]
        else:
            assert list(listed) == registry.datasets_of(name)
    from fuseflow.models.gpt3 import GPT3_SMALL, GPT3_WIDE  # noqa: F401 - the configs exist
    from fuseflow.models.sae import SAE_SIZES

    assert set(SAE_SIZES) == set(BUILT_IN["sae"])


def test_study_help_names_the_gpt3_configs(capsys):
    assert main(["study", "fusion", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "gpt3-bigbird: tiny, mini, wide, deep, small, small2" in text and "URL.npz#sha256=HEX" in text


def test_study_of_a_case_standing_for_a_larger_model_reports_its_cycles(monkeypatch, capsys):
    """A built-in case of a few decoders (GPT-3 small2) keeps its `layers` through the command
    line: the JSON rows carry the whole model's cycles and the speedups are on them."""
    build = registry.build

    def two_for_twelve(*args, **kwargs):
        case = build(*args, **kwargs)
        case.layers = (2, 12)  # tiny has two decoders: let them stand for twelve
        return case

    monkeypatch.setattr(registry, "build", two_for_twelve)
    assert main(["study", "fusion", "--model", "gpt3-bigbird", "--dataset", "tiny", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(r["verified"] is True and r["model_cycles"] > r["cycles"] for r in rows)
    assert rows[1]["speedup"] == pytest.approx(rows[0]["model_cycles"] / rows[1]["model_cycles"])
