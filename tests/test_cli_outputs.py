"""Output paths: one file per kernel named before the extension (in directories whose names hold
dots and spaces), refusals before any work for paths that cannot be written, and atomic writes
that leave nothing half-written."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import error_of

from fuseflow.cli import main

MLIR = Path(__file__).parent / "mlir"
CHAIN = str(MLIR / "matmul_chain.mlir")


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


SPMV = str(MLIR / "spmv.mlir")


@pytest.mark.parametrize("argv, needle", [
    (["compile", SPMV, "-o", "/nonexistent/x.json"], "-o: directory /nonexistent does not exist"),
    (["compile", SPMV, "-o", "{tmp}"], "is a directory"),
    (["compile", SPMV, "-o", "/dev/full"], "/dev/full is not a regular file"),
    (["compile", SPMV, "--svg", "/nonexistent/g.svg"], "--svg: directory /nonexistent does not exist"),
    (["compile", SPMV, "--svg", "{tmp}/g.txt"], "does not end in .svg or .png or .pdf"),
    (["simulate", SPMV, "--save-outputs", "/nonexistent/o.npz"], "directory /nonexistent does not exist"),
    (["simulate", SPMV, "--save-outputs", "/dev/full"], "--save-outputs: /dev/full does not end in .npz"),
    (["simulate", SPMV, "--save-outputs", "{tmp}/o.npz"], "is a directory"),
    (["study", "fusion", "--model", "gcn", "--plot", "/nonexistent/p.png"], "directory /nonexistent does not exist"),
    (["gpu", "plan", "--chain", "G1", "--emit-cuda", "/nonexistent/k.cu"], "directory /nonexistent does not exist"),
    (["sweep", SPMV, "--db", "/nonexistent/s.db"], "directory /nonexistent does not exist"),
    (["plot", "{tmp}/none.db"], "no sweep database"),
])
def test_unwritable_outputs_are_refused_before_any_work(argv, needle, tmp_path, capsys, monkeypatch):
    import fuseflow.api

    def no_work(*args, **kwargs):
        raise AssertionError("work started before the output path was checked")

    monkeypatch.setattr(fuseflow.api, "simulate", no_work)
    monkeypatch.setattr(fuseflow.api, "study", no_work)
    (tmp_path / "o.npz").mkdir()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert needle in error_of(argv, capsys)


@pytest.mark.slow
def test_plot_charts_into_a_missing_directory(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    assert main(["sweep", SPMV, "-g", "full", "--engine", "oracle", "--db", db, "-q"]) == 0
    err = error_of(["plot", db, "-o", str(tmp_path / "no" / "such" / "charts")], capsys)
    assert "directory" in err and "does not exist" in err
    assert main(["plot", db, "-o", str(tmp_path / "charts")]) == 0
    assert any(p.suffix == ".png" for p in (tmp_path / "charts").iterdir())
    assert main(["plot", db, "-o", str(tmp_path / "vector"), "--format", "pdf"]) == 0
    assert all(p.read_bytes().startswith(b"%PDF") for p in (tmp_path / "vector").iterdir())


def test_a_failed_write_leaves_nothing(tmp_path, capsys, monkeypatch):
    import fuseflow.cmdline.compile as command

    def half_written(graph, path):
        with open(path, "w") as handle:
            handle.write("<svg")  # then the renderer dies
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(command, "render", half_written)
    (tmp_path / "g.svg").write_text("the previous picture")
    err = error_of(["compile", SPMV, "--svg", str(tmp_path / "g.svg")], capsys)
    assert "cannot write" in err and "No space left on device" in err
    assert os.listdir(tmp_path) == ["g.svg"] and (tmp_path / "g.svg").read_text() == "the previous picture"


def test_saved_outputs_are_exactly_the_named_file(tmp_path, capsys):
    out = tmp_path / "result.npz"
    assert main(["simulate", SPMV, "--save-outputs", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    with np.load(out) as saved:
        assert list(saved.files) == ["out0"] and saved["out0"].shape == (64,)
    assert sorted(os.listdir(tmp_path)) == ["result.npz"] and result["verified"]
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~current_umask())


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
