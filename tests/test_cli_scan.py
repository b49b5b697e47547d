"""A scan of the command line with hostile values: every command, each of its flags given values
from the classes of bad input (paths, text, numbers, schedules, shapes). Whatever the values, the
exit status is 0 (the input happened to be fine), 2 (one line naming the problem) or 130; never 3,
which would mean a bug in fuseflow."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuseflow.cli import main

MLIR = Path(__file__).parent / "mlir"
SPMV = str(MLIR / "spmv.mlir")

VALUES = ["-1", "0", "1", "²", "٣", "nan", "inf", "1e400", "99999999999999999999", "", " ", "x", "A=0x6",
          "A=-3x6", "A=2x", "arg0=4", "/nonexistent/x.json", "/dev/full", "/dev/null", str(MLIR), SPMV,
          "fusion=[", "fusion=[y][y]", "par=i:²", "par=q:2", "order.9=#99", "block=0", "format.A=sparse",
          "full layout=induced par=i:100000", "model:gcn", "gcn", "x.py:Net", "{}", "[1,2", "1G", "-3G",
          "http://127.0.0.1:9/g.npz#sha256=" + "0" * 64, "synthetic:nothing", "A=compressed", "ffn:1,2,3,4"]

COMMANDS = {
    ("inspect",): ["--json", "--format", "--shape", "--func", "--dataset", "--model", "--torch", "--input"],
    ("compile",): ["--schedule", "-o", "--svg", "--shape", "--format", "--inputs", "--seed", "--density"],
    ("orders",): ["--schedule", "--group", "--shape", "--inputs"],
    ("simulate",): ["--schedule", "--inputs", "--save-outputs", "--seed", "--density", "--depth", "--shape",
                    "--engine"],
    ("study", "fusion"): ["--schedule", "--schedules", "--plot", "--max-tokens", "--scale", "--block", "--dataset",
                          "--data-dir"],
    ("sweep",): ["-g", "--orders", "--par", "--density", "--dataset", "--block", "--seed", "--shape", "--db",
                 "--jobs", "--prune", "--limit", "--max-orders"],
    ("gpu", "plan"): ["--chain", "--topk", "--device", "--emit-cuda"],
    ("help",): [],
}
FLAG_ONLY = {"--json"}


@st.composite
def command_lines(draw):
    command = draw(st.sampled_from(sorted(COMMANDS)))
    argv = list(command)
    if command[0] in ("inspect", "compile", "orders", "simulate", "sweep"):
        argv.append(draw(st.sampled_from([SPMV, SPMV, "model:sae", "x.py:Net", "/nonexistent.mlir", str(MLIR)])))
    if command == ("help",):
        argv.append(draw(st.sampled_from(VALUES)))
    for flag in draw(st.lists(st.sampled_from(COMMANDS[command] or ["--debug"]), max_size=3, unique=True)):
        if flag == "--debug":
            continue
        argv += [flag] if flag in FLAG_ONLY else [flag, draw(st.sampled_from(VALUES))]
    if command[0] == "gpu" and "--chain" not in argv:
        argv += ["--chain", draw(st.sampled_from(["G1", "ffn:100000000,100000000,100000000,100000000", "x"]))]
    return argv


@pytest.mark.slow
@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(command_lines())
def test_no_input_is_an_internal_error(tmp_path_factory, argv):
    work = tmp_path_factory.mktemp("scan")
    copy = work / "spmv.mlir"  # outputs may name the model file: never the repository's copy
    copy.write_text(Path(SPMV).read_text())
    argv = [str(copy) if a == SPMV else a.replace("/nonexistent/x.json", str(work / "missing" / "x.json"))
            for a in argv]
    if "--db" not in argv and argv[0] == "sweep":
        argv += ["--db", str(work / "s.db"), "-q", "--limit", "1"]
    here = os.getcwd()
    os.chdir(work)  # relative outputs (`-o nan`) land in the scan's directory
    try:
        code = main(["--max-memory", "8G", *argv])
    finally:
        os.chdir(here)
    assert code in (0, 2, 130), argv
