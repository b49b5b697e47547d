"""The warm-up (`python -m fuseflow.warmup`, run by scripts/setup.sh) leaves nothing for numba to
compile: after it, the README's first command compiles no kernel signature."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from numba import types

from fuseflow.warmup import MAX_ARITY, _with_arity, kernel_dispatchers

STUDY = textwrap.dedent("""
    from fuseflow.cli import main
    from fuseflow.warmup import compilations
    code = main(["study", "fusion", "--model", "gcn", "--dataset", "karate"])
    print("compiled", compilations())
    raise SystemExit(code)
""")


def test_widened_signature_changes_only_tuple_lengths():
    ints = types.Array(types.int64, 1, "C")
    signature = (ints, types.int64, types.UniTuple(ints, 2), types.UniTuple(types.Array(types.int8, 1, "C"), 2))
    widened = _with_arity(signature, 5)
    assert widened[:2] == signature[:2]
    assert [t.count for t in widened[2:]] == [5, 5]
    assert [t.dtype for t in widened[2:]] == [t.dtype for t in signature[2:]]


def test_the_kernels_taking_tuples_are_found():
    names = {d.py_func.__name__ for d in kernel_dispatchers()}
    assert {"_k_copy", "_k_join", "_k_joiner"} <= names
    assert MAX_ARITY >= 13  # GPT-3 wide's fused layer has a broadcast to 13 readers


@pytest.mark.slow
def test_first_study_after_warmup_compiles_nothing():
    warm = subprocess.run([sys.executable, "-m", "fuseflow.warmup"], capture_output=True, text=True)
    assert warm.returncode == 0, warm.stderr
    run = subprocess.run([sys.executable, "-c", STUDY], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "compiled 0" in run.stdout.splitlines()[-1], run.stdout + run.stderr
    assert "compiling the simulator's kernels" not in run.stderr
