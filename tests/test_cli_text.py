"""Text the user writes: files that are not UTF-8, numbers outside their range or not in ASCII
digits, shapes below 1, zero-size dimensions, and inputs nested deeper than fuseflow follows.
Each gives one line and exit status 2."""
from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import error_of

from fuseflow.cli import main

MLIR = Path(__file__).parent / "mlir"
SPMV = str(MLIR / "spmv.mlir")


def test_a_mlir_file_that_is_not_utf8(tmp_path, capsys):
    path = tmp_path / "latin1.mlir"
    path.write_bytes(Path(SPMV).read_bytes().replace(b"spmv", b"sp\xe9mv", 1))  # Latin-1, not UTF-8
    err = error_of(["inspect", str(path)], capsys)
    assert f"{path}: not UTF-8 text (byte 0xe9 at offset" in err


def test_a_device_file_that_is_not_utf8(tmp_path, capsys):
    path = tmp_path / "gpu.json"
    path.write_bytes(b'{"name": "H\xff00"}')
    assert "not UTF-8 text (byte 0xff at offset 11)" in error_of(["gpu", "plan", "--chain", "G1", "--device",
                                                                  str(path)], capsys)


@pytest.mark.parametrize("argv, needle", [
    (["simulate", SPMV, "--seed", "-1"], "argument --seed: '-1' is not a whole number"),
    (["sweep", SPMV, "--seed", "-1", "-q"], "--seed '-1' is not a whole number of at least 0"),
    (["simulate", SPMV, "--seed", "٣"], "'٣' is not a whole number written in digits 0-9"),
    (["simulate", SPMV, "--density", "nan"], "argument --density: 'nan' is not a finite number"),
    (["simulate", SPMV, "--density", "1.5"], "argument --density: 1.5 is outside (0, 1]"),
    (["simulate", SPMV, "--depth", "0"], "argument --depth: 0 must be at least 1"),
    (["--max-memory", "-3G", "simulate", SPMV], "argument --max-memory"),
    (["sweep", SPMV, "--shape", "A=0x6"], "'A=0x6' has a dimension below 1"),
    (["sweep", SPMV, "--shape", "A=-3x6"], "'A=-3x6' is not NAME=AxB with whole numbers"),
    (["simulate", SPMV, "--shape", "A=²x6"], "'A=²x6' is not NAME=AxB with whole numbers"),
    (["sweep", SPMV, "--block", "0"], "--block '0' is not a whole number of at least 1"),
    (["sweep", SPMV, "--block", "99999999999999999999"], "(and at most 4611686018427387904)"),
    (["sweep", SPMV, "--density", "inf"], "--density 'inf' is not a finite number"),
    (["compile", SPMV, "--schedule", "full block=²"], "the block size must be a positive integer"),
    (["compile", SPMV, "--schedule", "full par=i:²"], "cannot read 'i:²'"),
    (["compile", SPMV, "--schedule", "full order.²=i,j"], "bad group number"),
    (["compile", SPMV, "--schedule", "full par=i:99999999999999999999"], "no loop of spmv has more than 64"),
    (["compile", SPMV, "--schedule", "full block=7"], "block=7 divides no dimension of spmv"),
])
def test_numbers_on_the_command_line(argv, needle, capsys):
    assert needle in error_of(argv, capsys)


def test_zero_size_dimensions(tmp_path, capsys):
    path = tmp_path / "zero.mlir"
    path.write_text(Path(SPMV).read_text().replace("64x48", "0x48").replace("tensor<64xf32>", "tensor<0xf32>"))
    for command in (["simulate"], ["study", "fusion"], ["compile"]):
        assert "input A has a zero-size dimension [0, 48]" in error_of([*command, str(path)], capsys)


def chain_of(ops: int) -> str:
    """An MLIR function applying `ops` elementwise ops one after another."""
    identity = "affine_map<(d0) -> (d0)>"
    lines, previous = ["func.func @chain(%a: tensor<4xf32>) -> tensor<4xf32> {"], "%a"
    for k in range(ops):
        lines += [f"  %e{k} = tensor.empty() : tensor<4xf32>",
                  f"  %y{k} = linalg.generic {{indexing_maps = [{identity}, {identity}], iterator_types = "
                  f"[\"parallel\"]}} ins({previous} : tensor<4xf32>) outs(%e{k} : tensor<4xf32>) {{",
                  "  ^bb0(%x: f32, %o: f32):", "    %r = arith.addf %x, %x : f32", "    linalg.yield %r : f32",
                  "  } -> tensor<4xf32>"]
        previous = f"%y{k}"
    return "\n".join(lines + [f"  return {previous} : tensor<4xf32>", "}"]) + "\n"


def body_of(ops: int) -> str:
    """One elementwise op whose body chains `ops` scalar additions."""
    identity = "affine_map<(d0) -> (d0)>"
    lines = ["func.func @body(%a: tensor<4xf32>) -> tensor<4xf32> {", "  %e = tensor.empty() : tensor<4xf32>",
             f"  %y = linalg.generic {{indexing_maps = [{identity}, {identity}], iterator_types = [\"parallel\"]}} "
             "ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {", "  ^bb0(%x: f32, %o: f32):"]
    previous = "%x"
    for k in range(ops):
        lines.append(f"    %v{k} = arith.addf {previous}, %x : f32")
        previous = f"%v{k}"
    return "\n".join(lines + [f"    linalg.yield {previous} : f32", "  } -> tensor<4xf32>",
                              "  return %y : tensor<4xf32>", "}"]) + "\n"


@pytest.mark.parametrize("make", [chain_of, body_of])
def test_two_thousand_ops(make, tmp_path, capsys):
    path = tmp_path / "long.mlir"
    path.write_text(make(2000))
    err = error_of(["inspect", str(path)], capsys)
    assert "nests its ops or expressions more deeply than fuseflow's importer follows" in err
    path.write_text(make(200))  # a long but ordinary program still imports
    assert main(["inspect", str(path)]) == 0


def test_a_deeply_nested_device_file(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert "nests its JSON too deeply" in error_of(["gpu", "plan", "--chain", "G1", "--device", str(path)], capsys)


def test_a_config_file_with_a_bad_shape(tmp_path, capsys):
    config = tmp_path / "sweep.toml"
    config.write_text(f'program = "{SPMV}"\nshapes = {{ A = [0, 6] }}\n')
    assert "has a dimension below 1" in error_of(["sweep", "--config", str(config)], capsys)
