"""The `fuseflow` command: output forms, and one-line errors with exit status 2."""
import json
import textwrap

import pytest
from cli_helpers import error_of

from fuseflow.cli import main

SPMV = textwrap.dedent("""
    #csr = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
    func.func @spmv(%A: tensor<4x4xf32, #csr>, %x: tensor<4xf32>) -> tensor<4xf32> {
      %z = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<4xf32>
      %f = linalg.fill ins(%z : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
      %y = linalg.matvec ins(%A, %x : tensor<4x4xf32, #csr>, tensor<4xf32>) outs(%f : tensor<4xf32>) -> tensor<4xf32>
      return %y : tensor<4xf32>
    }
""")

MODEL = textwrap.dedent("""
    import torch
    class Net(torch.nn.Module):
        def __init__(self, width=3):
            super().__init__()
            self.lin = torch.nn.Linear(4, width)
        def forward(self, A, X):
            return torch.relu(self.lin(A @ X))
    def example_inputs():
        return (torch.eye(5).to_sparse_csr(), torch.ones(5, 4))
""")


@pytest.fixture
def spmv_file(tmp_path):
    path = tmp_path / "spmv.mlir"
    path.write_text(SPMV)
    return path


def test_inspect_prints_index_notation(spmv_file, capsys):
    assert main(["inspect", str(spmv_file)]) == 0
    out = capsys.readouterr().out
    assert "y(i) = sum[j] A(i,j) * x(j)" in out
    assert "A: f32[4,4] {dense,compressed}" in out


def test_inspect_json_and_format_override(spmv_file, capsys):
    assert main(["inspect", str(spmv_file), "--json", "--format", "A=compressed,compressed"]) == 0
    data = json.loads(capsys.readouterr().out)
    levels = {t["name"]: t["levels"] for t in data["tensors"]}
    assert levels["A"] == ["compressed", "compressed"]
    assert data["ops"][-1]["reduce_vars"] == ["j"]


def test_inspect_torch_with_inputs_and_init(tmp_path, capsys):
    path = tmp_path / "net.py"
    path.write_text(MODEL)
    assert main(["inspect", "--torch", f"{path}:Net", "--input", "5x5:csr", "--input", "5x4",
                 "--init", '{"width": 2}']) == 0
    out = capsys.readouterr().out
    assert "A: f32[5,5] {dense,compressed}" in out
    assert "lin_weight: f32[2,4]" in out


def test_inspect_torch_uses_example_inputs(tmp_path, capsys):
    path = tmp_path / "net.py"
    path.write_text(MODEL)
    assert main(["inspect", "--torch", f"{path}:Net"]) == 0
    assert "X: f32[5,4]" in capsys.readouterr().out


@pytest.mark.parametrize("argv, needle", [
    (["inspect", "/no/such/file.mlir"], "no such MLIR file"),
    (["inspect", "--torch", "/no/such.py:Net"], "no such Python file"),
    (["inspect", "--torch", "nocolon"], "is not FILE.py:CLASS"),
    (["inspect", "--torch", "x.py:Net", "--input", "5by5"], None),
])
def test_errors_are_one_line_exit_2(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fuseflow: error: ")
    assert err.count("\n") == 1 and "Traceback" not in err
    if needle:
        assert needle in err


HEAD = "import sys, torch\nclass Net(torch.nn.Module):\n"
FORWARD = "    def forward(self, A, X):\n"


@pytest.mark.parametrize("body, needle, line", [
    ("import sys\nsys.exit(5)\n" + HEAD + FORWARD + "        return A @ X\n", "importing net.py called sys.exit(5)",
     2),
    (HEAD + FORWARD + "        sys.exit(0)\n", "Net.forward called sys.exit(0)", 4),
    (HEAD + "    def __init__(self):\n        super().__init__()\n        raise ValueError('bad width')\n",
     "Net.__init__ raised ValueError: bad width", 5),
    (HEAD + FORWARD + "        raise RuntimeError('oops')\n", "Net.forward raised RuntimeError: oops", 4),
    (HEAD + FORWARD + "        while True:\n            try:\n                pass\n            except Exception:\n"
     "                pass\n", "Net.forward did not return within 2 s", None),
])
def test_a_model_file_that_exits_raises_or_hangs_is_one_line(tmp_path, capsys, body, needle, line):
    """Issue #40: the user's module exiting (at import, in forward), raising (in __init__, in
    forward) or never returning (past --timeout) is the user's error: one line, exit 2, naming the
    file and line."""
    path = tmp_path / "net.py"
    path.write_text(body)
    timeout = "2" if "did not return" in needle else "600"  # the loop is reached at once (torch.fx), before the export
    err = error_of(["inspect", f"{path}:Net", "--input", "5x5:csr", "--input", "5x4", "--timeout", timeout], capsys)
    assert needle in err
    assert f"{path}:{line or ''}" in err


def test_timeout_applies_to_pytorch_classes_only(spmv_file, capsys):
    assert "--timeout does not apply to MLIR files" in error_of(["inspect", str(spmv_file), "--timeout", "5"],
                                                                capsys)


def test_bad_mlir_names_line(tmp_path, capsys):
    path = tmp_path / "bad.mlir"
    path.write_text("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %b : tensor<4xf32>\n}\n")
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2:" in err and err.count("\n") == 1


def test_bad_format_flag(spmv_file, capsys):
    assert main(["inspect", str(spmv_file), "--format", "A=sparse,dense"]) == 2
    assert "unknown level format 'sparse'" in capsys.readouterr().err


def test_demo_checks_reference(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "reference check: PASSED" in out and "karate: 34 nodes, 156 stored edges" in out


def _gpu_line(parser) -> str:
    commands = next(a for a in parser._actions if a.dest == "command")
    return next(c.help for c in commands._choices_actions if c.dest == "gpu")


def test_the_gpu_stand_in_says_what_the_gpu_commands_say():
    """`fuseflow --help` lists `gpu` without importing cmdline/gpu (numpy); its line is cmdline/gpu's own."""
    from fuseflow.cmdline.grammar import build_parser

    assert _gpu_line(build_parser()) == _gpu_line(build_parser("gpu"))
    assert build_parser("gpu").parse_args(["gpu", "plan", "--chain", "G1"]).topk > 0


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["--help"], ["help"], ["help", "schedules"], ["help", "simulate"],
                                  ["study", "fusion", "--help"]])
def test_help_loads_no_compiler_simulator_or_heavy_library(argv):
    """Issue #28: help answers at once because parsing imports only the grammar; the command's
    module (and torch, torch-mlir, numba, dask, matplotlib with it) loads when the command runs."""
    import subprocess
    import sys

    heavy = ("torch", "torch_mlir", "numba", "dask", "matplotlib", "numpy", "fuseflow.fusion", "fuseflow.sim")
    code = ("import sys, contextlib, io\nfrom fuseflow.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main({argv!r}) == 0\n"
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.slow
def test_mlir_commands_load_only_what_they_need():
    """Issue #28: `inspect` and `simulate` of an .mlir file load torch-mlir (the parser), and
    `simulate` numba, but neither loads torch, dask, matplotlib or scipy's clustering (bench/startup.py
    measures what that saves)."""
    import os
    import subprocess
    import sys

    heavy = ("torch", "torch_mlir", "numba", "dask", "matplotlib", "scipy.spatial")
    spmv = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlir", "spmv.mlir")
    code = ("import sys, contextlib, io\nfrom fuseflow.cli import main\nloaded = []\n"
            f"for argv in (['inspect', {spmv!r}], ['simulate', {spmv!r}]):\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n        assert main(argv) == 0\n"
            f"    loaded.append(sorted(m for m in {heavy!r} if m in sys.modules))\nprint(loaded)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str([["torch_mlir"], ["numba", "torch_mlir"]])


def _help_of(argv, capsys) -> str:
    assert main([*argv, "--help"]) == 0
    return capsys.readouterr().out


def test_study_help_explains_every_column(capsys):
    """Issue #28: `study fusion --help` says what each column of its table means."""
    from fuseflow.studies.granularity import COLUMNS, MODEL_CYCLES

    text = _help_of(["study", "fusion"], capsys)
    explained = text.split("columns (")[1]
    for _, label, _ in [*COLUMNS[1:], MODEL_CYCLES]:
        assert label in explained, label


def test_gpu_plan_help_explains_every_column(capsys):
    """... and `gpu plan --help` each column of its plan table."""
    from fuseflow.gpu.problem.device import LEVELS

    explained = _help_of(["gpu", "plan"], capsys).split("columns (")[1]
    for label in ("schedule", "strat", "cls m,n,k,l", "blk m,n,k,l", "sh,red", "E_acc", *LEVELS, "time us", "bound"):
        assert label in explained, label
