"""Output paths: one file per kernel named before the extension (in directories whose names hold
dots and spaces), refusals before any work for paths that cannot be written, and atomic writes
that leave nothing half-written."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from fuseflow.cli import main

MLIR = Path(__file__).parent / "mlir"
CHAIN = str(MLIR / "matmul_chain.mlir")


def error_of(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fuseflow: error: ") and err.count("\n") == 1, err
    return err


def test_kernel_pictures_go_beside_the_named_file(tmp_path, capsys):
    out = tmp_path / "tmp.k1 x.dir" / "my graphs.v2"  # dots and spaces in directory and file
    out.mkdir(parents=True)
    assert main(["compile", CHAIN, "--schedule", "unfused", "--svg", str(out / "g.svg")]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["g.k0.svg", "g.k1.svg"]
    assert all((out / n).read_text().lstrip().startswith(("<?xml", "<svg")) for n in ("g.k0.svg", "g.k1.svg"))
    assert capsys.readouterr().out.count("wrote ") == 2


def test_a_relative_picture_path_with_a_leading_dot(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["compile", CHAIN, "--schedule", "unfused", "--svg", "./g.svg"]) == 0
    assert sorted(os.listdir(tmp_path)) == ["g.k0.svg", "g.k1.svg"]


def test_one_kernel_keeps_the_name(tmp_path, capsys):
    assert main(["compile", CHAIN, "--schedule", "full", "--svg", str(tmp_path / "a.b.svg"),
                 "-o", str(tmp_path / "g.json")]) == 0
    assert sorted(os.listdir(tmp_path)) == ["a.b.svg", "g.json"]
    assert json.loads((tmp_path / "g.json").read_text())["nodes"]

