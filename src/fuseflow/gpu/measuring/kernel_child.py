"""The child process of a GPU run: ``python -m fuseflow.gpu.measuring.kernel_child JOBS RESULTS FIRST`` runs
the jobs of the JSON file JOBS from index FIRST, appending a ``start`` and a ``done`` record per job to
RESULTS. After a CUDA fault (the context is lost) it exits 3 and the watchdog starts a fresh child.

    >>> status_of(float("nan"), "launch of k failed with CUDA error 700", "fp16")
    'fault'
"""
from __future__ import annotations

import ctypes
import math
import subprocess
import sys
import time

from fuseflow.errors import FuseflowError

from ..kernels.nvcc import find_nvcc
from ..planning.planner import plan_chain
from ..problem.benchmarks import parse_chain
from ..problem.device import Device
from .kernel_jobs import KernelJob, read_jobs
from .kernel_runner import (
    TOLERANCE,
    kernel_launcher,
    make_inputs,
    measure_compiled,
    measure_copy_bandwidth,
    measure_plan,
    relative_error,
    require_cuda,
    torch_chain,
)
from .result_log import Record, append
from .timing_stats import time_cuda

FAULT_EXIT = 3


def status_of(max_error: float, error: str, dtype: str) -> str:
    """ok, wrong (outside tolerance) or fault (a launch or CUDA error)."""
    if error:
        return "fault"
    return "ok" if math.isfinite(max_error) and max_error <= TOLERANCE[dtype] else "wrong"


class _Chain:
    """A chain's inputs, FP32 reference and plans, kept while consecutive jobs use the chain."""

    def __init__(self, torch, spec: str, dtype: str, topk: int):
        self.chain = parse_chain(spec)
        self.inputs = make_inputs(self.chain, dtype, torch)
        fp32 = [t.float() if t is not None else None for t in self.inputs]
        self.ref = torch_chain(self.chain, torch)(*fp32)
        self.plans = plan_chain(self.chain, Device(), topk=topk).plans


def _gpu_facts(torch) -> dict:
    props = torch.cuda.get_device_properties(0)
    nvcc = subprocess.run([find_nvcc(), "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    return {"name": props.name, "sms": props.multi_processor_count, "l2_bytes": int(props.L2_cache_size),
            "copy_bandwidth": measure_copy_bandwidth(torch), "torch_version": torch.__version__,
            "nvcc_version": nvcc[-1] if nvcc else "?"}


def run_job(torch, job: KernelJob, held: dict, libs: dict) -> tuple[str, str, dict]:
    """(status, reason, data) of one job."""
    if job.stage == "env":
        return "ok", "", _gpu_facts(torch)
    if job.stage == "compile":
        return "ok", "", measure_compiled(parse_chain(job.chain), job.dtype, job.reps).to_json()
    key = (job.chain, job.dtype)
    if held.get("key") != key:
        held.clear()
        held.update(key=key, chain=_Chain(torch, job.chain, job.dtype, max(job.rank, 4)))
    c = held["chain"]
    if job.stage == "eager":
        eager = torch_chain(c.chain, torch)
        return "ok", "", time_cuda(lambda: eager(*c.inputs), torch, reps=job.reps).to_json()
    if job.library not in libs:
        libs[job.library] = ctypes.CDLL(job.library)
    lib, plan = libs[job.library], c.plans[job.rank - 1]
    if job.stage == "smoke":
        E = torch.empty(c.chain.M, c.chain.L, device="cuda", dtype=c.inputs[0].dtype)
        try:
            kernel_launcher(lib, job.symbol, (*c.inputs, E), torch.cuda.current_stream().cuda_stream)()
            torch.cuda.synchronize()
        except RuntimeError as err:
            return "fault", str(err).splitlines()[0][:300], {}
        err = relative_error(E, c.ref)
        status = status_of(err, "", job.dtype)
        return status, "" if status == "ok" else f"max error {err:.2e} over {TOLERANCE[job.dtype]:.0e}", \
            {"max_error": err}
    m = measure_plan(torch, lib, job.symbol, c.chain, job.rank, plan, c.inputs, c.ref, job.dtype, job.reps)
    status = status_of(m.max_error, m.error, job.dtype)
    reason = m.error or ("" if status == "ok" else f"max error {m.max_error:.2e} over {TOLERANCE[job.dtype]:.0e}")
    return status, reason, m.to_json()


def main(argv: list[str]) -> int:
    jobs_file, results, first = argv[0], argv[1], int(argv[2])
    try:
        torch = require_cuda("gpu run (child)")
    except FuseflowError as err:
        print(f"fuseflow: error: {err.one_line()}", file=sys.stderr)
        return 2
    held, libs = {}, {}
    for job in read_jobs(jobs_file)[first:]:
        append(results, Record("start", job.key, job.stage, job.chain, job.rank, job.path, launch=job.launch))
        t0 = time.monotonic()
        try:
            status, reason, data = run_job(torch, job, held, libs)
        except (RuntimeError, OSError, ValueError) as err:   # torch's CUDA errors are RuntimeErrors
            status, reason, data = "fault" if "CUDA" in str(err) else "error", str(err).splitlines()[0][:300], {}
        append(results, Record("done", job.key, job.stage, job.chain, job.rank, job.path, status, reason,
                               time.monotonic() - t0, job.launch, data))
        if status == "fault":
            return FAULT_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
