"""``fuseflow gpu bench --run``: every benchmark chain's kernels compiled, run and timed on the GPU,
torch.compile beside them while the time budget lasts, then the report and the fitted device file.

Each chain runs in its own process (``fuseflow.cmdline.gpu run``) with a time limit, so a kernel that
hangs or faults costs that chain, not the run. Compilation happens first, in parallel.

    >>> failed_chain("G1", (1, 2, 3, 4), "timed out after 60 s").plans[0].error
    'timed out after 60 s'
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..kernels.codegen import emit_library
from ..kernels.nvcc import compile_cuda
from ..planning.planner import plan_chain
from ..problem.benchmarks import BENCHMARKS
from ..problem.device import Device
from .measurements import ChainMeasurement, PlanMeasurement

COMPILE_ESTIMATE_S = 25     # a torch.compile of one chain, first call included (budget check)
HANGS_BEFORE_STOP = 3       # chains in a row whose process timed out before the rest are not started


@dataclass(frozen=True)
class RunOptions:
    chains: tuple[str, ...]
    topk: int = 4            # plans measured per chain
    dtype: str = "fp16"
    reps: int = 25
    budget_s: float = 420.0
    chain_timeout_s: float = 60.0
    out_dir: str = "."       # where each chain's process writes its JSON


def failed_chain(name: str, dims, why: str) -> ChainMeasurement:
    """A chain whose process did not finish: its rank-1 plan carries the reason."""
    plan = PlanMeasurement(name, 1, "-", float("nan"), None, float("nan"), False, {}, 0, 0.0, why)
    return ChainMeasurement(name, tuple(dims), 0.0, [plan], None, None, float("nan"), "-", notes=[why])


def precompile(opts: RunOptions, device: Device) -> dict[str, str]:
    """Build every chain's library in parallel (nvcc, cached by source hash); {chain: '' or the error}."""
    def build(name):
        chain = BENCHMARKS[name]
        plans = plan_chain(chain, device, topk=opts.topk).plans
        source, _ = emit_library(chain, enumerate(plans, 1), device, opts.dtype)
        result = compile_cuda(source, shared=True)
        return name, "" if result.ok else result.log[-2000:]
    with ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2))) as pool:
        return dict(pool.map(build, opts.chains))


def run_chain_process(name: str, opts: RunOptions) -> ChainMeasurement:
    """``python -m fuseflow.cmdline.gpu run`` for one chain, its JSON read back."""
    out = pathlib.Path(opts.out_dir) / f"chain_{name}.json"
    cmd = [sys.executable, "-m", "fuseflow.cmdline.gpu", "run", "--chain", name, "--topk-measure", str(opts.topk),
           "--dtype", opts.dtype, "--reps", str(opts.reps), "--json-out", str(out)]
    dims = BENCHMARKS[name].dims
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=opts.chain_timeout_s)
    except subprocess.TimeoutExpired:
        return failed_chain(name, dims, f"timed out after {opts.chain_timeout_s:.0f} s (a kernel hang?)")
    if proc.returncode != 0 or not out.exists():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return failed_chain(name, dims, f"process exited {proc.returncode}: {last}")
    return ChainMeasurement.from_json(json.loads(out.read_text()))


def add_compiled(rows: list[ChainMeasurement], opts: RunOptions, deadline: float, measure) -> list[ChainMeasurement]:
    """torch.compile timings while the budget lasts; the chains left say so."""
    out = []
    for row in rows:
        if time.monotonic() + COMPILE_ESTIMATE_S > deadline:
            out.append(row.with_compiled(None, "torch.compile not measured: the run's time budget was spent"))
            continue
        try:
            out.append(row.with_compiled(measure(BENCHMARKS[row.chain], opts.dtype, opts.reps)))
        except RuntimeError as err:      # an inductor or CUDA failure for this chain
            out.append(row.with_compiled(None, f"torch.compile failed: {str(err).splitlines()[0][:200]}"))
    return out


def run_all(opts: RunOptions, measure_compiled, progress=print) -> list[ChainMeasurement]:
    """Compile, run each chain in its own process, then torch.compile within the budget."""
    start = time.monotonic()
    deadline = start + opts.budget_s
    device = Device()
    errors = precompile(opts, device)
    progress(f"compiled {len(errors)} chain libraries in {time.monotonic() - start:.0f} s")
    rows, timeouts = [], 0
    for name in opts.chains:
        if errors[name]:
            rows.append(failed_chain(name, BENCHMARKS[name].dims, "nvcc failed: " + errors[name].splitlines()[-1]))
        elif timeouts >= HANGS_BEFORE_STOP:
            rows.append(failed_chain(name, BENCHMARKS[name].dims, f"not run: {timeouts} chains in a row timed out"))
        elif time.monotonic() + opts.chain_timeout_s / 3 > deadline:
            rows.append(failed_chain(name, BENCHMARKS[name].dims, "not run: the run's time budget was spent"))
        else:
            rows.append(run_chain_process(name, opts))
            timeouts = timeouts + 1 if "timed out" in rows[-1].fused.error else 0
        f = rows[-1].fused
        progress(f"{name}: " + (f"{f.timing.median_us:.1f} us, err {f.max_error:.1e}" if f and f.timing
                                else (f.error if f else "no plan")))
    return add_compiled(rows, opts, deadline, measure_compiled)
