"""Compile the fast engine's numba kernels into numba's on-disk cache (the `__pycache__` beside
`fuseflow/sim/fast`, or NUMBA_CACHE_DIR), so that later runs only load them.

numba compiles a kernel once per signature: the types of its arguments. Two things vary them:
the dtype of a stream's data (int64 coordinates or float64 values), and, for the kernels that
take a tuple of arrays (broadcast and fork: one per output; intersect and union: one per
operand; join: one per lane), the tuple's length. A run that meets a signature not in the cache
compiles it (a second or two each; `progress.numba_notice` says so once) and numba keeps it.

`python -m fuseflow.warmup` (scripts/setup.sh runs it) compiles what the README's first command
needs: it simulates GCN's presets on the karate graph (about 40 signatures). `--all` compiles the
rest (scripts/setup.sh starts it in the background, at low priority): every built-in model under
each of its presets on its smallest data and a sparse-sparse product under each dataflow order
(one accumulator, none, the order-2 accumulator; fork/join lanes), unbounded and on bounded
channels (whose kernels take a gate: another signature), then each tuple-taking
signature again for every length up to `MAX_ARITY`, the functions dealt over `--processes`
processes (each function's signatures in one process, so no two compile it twice). Only one
`--all` runs at a time, and one that finds a finished `--all` for the same sources ends at once.
Saves into the cache are locked per function (`sim/fast/kernel_cache.py`), so a command may
compile beside it.

    >>> "_k_copy" in {d.py_func.__name__ for d in kernel_dispatchers()}
    True
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numba
from numba import types

from .frontend import from_mlir
from .ir.generate import random_inputs
from .models.registry import build
from .pipeline import simulate
from .sim import fast
from .sim.bounded import Deadlock
from .sim.fast.dispatchers import kernel_dispatchers, load_cached
from .sim.hw import HwConfig

MAX_ARITY = 16  # tuple lengths compiled ahead (GPT-3 wide's fused layer: a 13-output broadcast, a 12-way union)

# built-in models on their smallest data (every preset of each is simulated): the first is the
# README's first command (what a plain warm-up compiles), the others `--all`
MODEL_CASES = (("gcn", "karate"), ("graphsage", "karate"), ("sae", "small"), ("gpt3-bigbird", "tiny"))
FIRST = MODEL_CASES[:1]

# C = A·B with both operands and the result in one sparse format, 40x40 at 10%
PRODUCT = """
#SP = #sparse_tensor.encoding<{{ map = (i, k) -> ({levels}) }}>
#mA = affine_map<(i, j, k) -> (i, j)>
#mB = affine_map<(i, j, k) -> (j, k)>
#mC = affine_map<(i, j, k) -> (i, k)>
func.func @product(%A: tensor<40x40xf32, #SP>, %B: tensor<40x40xf32, #SP>) -> tensor<40x40xf32, #SP> {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<40x40xf32, #SP>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<40x40xf32, #SP>) -> tensor<40x40xf32, #SP>
  %C = linalg.generic {{indexing_maps = [#mA, #mB, #mC], iterator_types = ["parallel", "reduction", "parallel"]}}
      ins(%A, %B : tensor<40x40xf32, #SP>, tensor<40x40xf32, #SP>) outs(%init : tensor<40x40xf32, #SP>) {{
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }} -> tensor<40x40xf32, #SP>
  return %C : tensor<40x40xf32, #SP>
}}
"""
PRODUCT_LEVELS = ("i : dense, k : compressed", "i : compressed, k : compressed")
# rows (a sparse accumulator), inner products (intersections), outer products (order-2
# accumulator), and rows dealt over two lanes (fork and join)
PRODUCT_SCHEDULES = ("full layout=induced order=i,j,k", "full layout=induced order=i,k,j",
                     "full layout=induced order=j,i,k", "full layout=induced order=i,j,k par=i:2")
BOUNDED = HwConfig(channel_depth=4)  # the products again on bounded channels (modelled FIFOs)


@dataclass
class WarmReport:
    """What a warm-up did: runs simulated, signatures compiled (not found in the cache), seconds."""

    runs: int
    compiled: int
    seconds: float


def compilations() -> int:
    """Signatures compiled in this process because numba's cache did not have them."""
    return sum(sum(d.stats.cache_misses.values()) for d in kernel_dispatchers())


def _simulate_cases(models=MODEL_CASES, products: bool = True) -> int:
    """Simulate `models`' presets and, with `products`, the products (verified against the
    reference); runs made."""
    runs = 0
    for name, dataset in models:
        case = build(name, dataset=dataset)
        for preset in case.presets.values():
            simulate(case.program, preset, case.inputs)
            runs += 1
    for levels in PRODUCT_LEVELS if products else ():
        program = from_mlir(PRODUCT.format(levels=levels))
        data = random_inputs(program, density=0.1, seed=1)
        for schedule in PRODUCT_SCHEDULES:
            simulate(program, schedule, data)
            try:  # a bounded channel's kernels take its gate (`core.gated`): other signatures
                simulate(program, schedule, data, hw=BOUNDED)
            except Deadlock:  # FIFOs this shallow may deadlock (fork/join lanes); the kernels ran
                pass
            runs += 2
    return runs


def _widened(t, k: int):
    """Type t with its tuples of arrays, also those inside a record (`core.Ins`), k long."""
    if isinstance(t, types.UniTuple) and isinstance(t.dtype, types.Array):
        return types.UniTuple(t.dtype, k)
    if isinstance(t, types.BaseNamedTuple):
        fields = [_widened(f, k) for f in t.types]
        return t if fields == list(t.types) else types.NamedTuple(fields, t.instance_class)
    return t


def _array_tuples(t) -> list:
    """The tuples of arrays in type t, also those inside a record."""
    if isinstance(t, types.UniTuple) and isinstance(t.dtype, types.Array):
        return [t]
    if isinstance(t, types.BaseNamedTuple):
        return [u for f in t.types for u in _array_tuples(f)]
    return []


def _with_arity(signature: tuple, k: int) -> tuple:
    return tuple(_widened(t, k) for t in signature)


def _widenable(dispatcher) -> list:
    """The signatures of `dispatcher` whose tuples of arrays (all of one length) are widened."""
    out = []
    for signature in list(dispatcher.signatures):
        tuples = [u for t in signature for u in _array_tuples(t)]
        if tuples and len({t.count for t in tuples}) == 1:
            out.append(signature)
    return out


def _widen(dispatchers) -> None:
    """Compile each widenable signature of `dispatchers` for every tuple length up to MAX_ARITY."""
    for dispatcher in dispatchers:
        for signature in _widenable(dispatcher):
            for k in range(1, MAX_ARITY + 1):
                dispatcher.compile(_with_arity(signature, k))


def _name(dispatcher) -> str:
    return f"{dispatcher.py_func.__module__}.{dispatcher.py_func.__qualname__}"


def _widen_named(names: list[str]) -> int:
    """In a process of its own: the named dispatchers' signatures loaded from numba's cache (the
    cases compiled them), then widened; signatures compiled."""
    by_name = {_name(d): d for d in kernel_dispatchers()}
    chosen = [by_name[n] for n in names]
    for dispatcher in chosen:
        load_cached(dispatcher)
    _widen(chosen)
    return compilations()


def _shares(dispatchers: list, processes: int) -> list[list]:
    """`dispatchers` dealt into `processes` groups of about equal compile work (widenable
    signatures), the largest first, so that no two processes write one function's cache index.

        >>> _shares(["a", "b", "c"], 1)
        [['a', 'b', 'c']]
    """
    if processes <= 1:
        return [list(dispatchers)]
    groups, loads = [[] for _ in range(processes)], [0] * processes
    for dispatcher in sorted(dispatchers, key=lambda d: -len(_widenable(d))):
        k = loads.index(min(loads))
        groups[k].append(dispatcher)
        loads[k] += len(_widenable(dispatcher))
    return groups


def _widen_arities(processes: int = 1) -> int:
    """Compile each signature holding tuples of arrays again for every tuple length up to
    MAX_ARITY, the functions dealt over `processes` processes; signatures compiled in the others."""
    groups = _shares([d for d in kernel_dispatchers() if _widenable(d)], processes)
    if len(groups) == 1:
        _widen(groups[0])
        return 0
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: numba is not forked
    with ProcessPoolExecutor(max_workers=len(groups) - 1, mp_context=context) as pool:
        futures = [pool.submit(_widen_named, [_name(d) for d in group]) for group in groups[1:]]
        _widen(groups[0])
        return sum(f.result() for f in futures)


def warm(processes: int = 1, everything: bool = True) -> WarmReport:
    """Compile (or load, when cached) the kernel signatures of the README's first command, or
    with `everything` those of every warm-up case, widened to every tuple length up to MAX_ARITY
    (in `processes` processes)."""
    start = time.perf_counter()
    if not everything:
        runs = _simulate_cases(FIRST, products=False)
        return WarmReport(runs, compilations(), time.perf_counter() - start)
    runs = _simulate_cases()
    elsewhere = _widen_arities(processes)
    return WarmReport(runs, compilations() + elsewhere, time.perf_counter() - start)


def _sources_digest() -> str:
    """A digest of the fast engine's sources, this module's and numba's version: what the cache
    of a finished `--all` was compiled from."""
    digest = hashlib.sha256(numba.__version__.encode())
    folder = os.path.dirname(fast.__file__)
    paths = [os.path.join(folder, name) for name in sorted(os.listdir(folder)) if name.endswith(".py")]
    for path in [*paths, __file__]:
        with open(path, "rb") as f:
            digest.update(path.encode() + f.read())
    return digest.hexdigest()[:16]


def _cache_folder() -> str:
    """The folder numba's cache keeps the engine's kernels in."""
    return next(d._cache.cache_path for d in kernel_dispatchers() if hasattr(d._cache, "cache_path"))


def warm_all(processes: int) -> WarmReport | None:
    """`warm(processes)` unless another `--all` is running or one finished for these sources
    (None then); a finished one leaves a stamp in the cache folder."""
    folder = _cache_folder()
    os.makedirs(folder, exist_ok=True)
    stamp = os.path.join(folder, f"fuseflow-warm-{_sources_digest()}")
    with open(os.path.join(folder, "fuseflow-warm.lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        if os.path.exists(stamp):
            return None
        report = warm(processes)
        open(stamp, "w").close()
        return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuseflow.warmup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true",
                        help="every built-in model, the products and every tuple length, not only the first "
                             "command's kernels (ends at once when another runs or one finished)")
    parser.add_argument("--processes", type=int, default=len(os.sched_getaffinity(0)),
                        help="with --all: processes the widening is dealt over (default: one per core)")
    args = parser.parse_args(argv)
    print("fuseflow: compiling the simulator's kernels with numba into its cache (once per install"
          + (", all of them)" if args.all else ")"), file=sys.stderr, flush=True)
    report = warm_all(max(1, args.processes)) if args.all else warm(everything=False)
    if report is None:
        print("fuseflow: another warm-up runs or has finished for these sources", file=sys.stderr)
        return 0
    print(f"fuseflow: {report.runs} warm-up runs, {report.compiled} kernel signatures compiled "
          f"({report.seconds:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
