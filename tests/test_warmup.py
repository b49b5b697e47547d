"""The warm-up (`python -m fuseflow.warmup`, run by scripts/setup.sh) leaves nothing for numba to
compile: after it, the README's first command compiles no kernel signature. numba's cache files
of the engine's kernels are saved under a lock, so processes compiling one kernel at once (the
background `--all` beside a command) keep every signature's own data."""
from __future__ import annotations

import fcntl
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest
from numba import types

from fuseflow.sim.fast.kernel_cache import LockedCacheFile
from fuseflow.warmup import (
    MAX_ARITY,
    PRODUCT_LEVELS,
    PRODUCT_SCHEDULES,
    _cache_folder,
    _simulate_cases,
    _with_arity,
    kernel_dispatchers,
    warm_all,
)

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


@pytest.mark.slow
def test_the_full_warmups_products_run_unbounded_and_bounded():
    # the background `--all` runs them; a failure there would pass unseen (a bounded product
    # with fork/join lanes deadlocks at depth 4: its kernels are compiled all the same)
    assert _simulate_cases(models=(), products=True) == 2 * len(PRODUCT_LEVELS) * len(PRODUCT_SCHEDULES)


def _save_many(folder: str, first: int) -> None:
    cache = LockedCacheFile(folder, "kernel", source_stamp="stamp")
    for key in range(first, first + 30):
        cache.save(key, f"data of {key}")


def test_two_processes_saving_one_kernel_keep_each_signature_apart(tmp_path):
    context = multiprocessing.get_context("spawn")
    savers = [context.Process(target=_save_many, args=(str(tmp_path), first)) for first in (0, 1000)]
    for p in savers:
        p.start()
    for p in savers:
        p.join()
    cache = LockedCacheFile(str(tmp_path), "kernel", source_stamp="stamp")
    keys = [*range(30), *range(1000, 1030)]
    assert [cache.load(k) for k in keys] == [f"data of {k}" for k in keys]


def test_a_second_full_warmup_ends_while_one_runs():
    folder = _cache_folder()
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "fuseflow-warm.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert warm_all(1) is None
