"""A GPU run in stages, each under its own time limit, every result appended to one JSON-lines file as it
arrives: the kernels compiled in parallel (the smoke stage's first); a smoke stage (one small kernel per
code path, one launch each, checked); the measurement of each chain's top plans whose code path passed
the smoke (the others recorded as failed, with the reason); compute-sanitizer on one kernel per code path;
then torch.compile while the budget lasts. ``rerun=True`` runs again only what the results file records as
failed, and writes each failing kernel's launch parameters and a standalone reproducer.

    >>> StageLimits().total_s() <= 9 * 60
    True
"""
from __future__ import annotations

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from ..kernels.codegen import emit_library
from ..kernels.nvcc import compile_cuda
from ..kernels.reproducer import LaunchParams, build_command, emit_reproducer
from ..planning.baselines import unfused
from ..problem.benchmarks import parse_chain
from ..problem.device import Device
from .kernel_jobs import KernelJob, PlannedKernel, planned_kernels, smoke_picks
from .result_log import Record, append, final_results, read_records
from .sanitizer import build_reproducer, find_sanitizer, sanitize
from .watchdog import run_jobs


@dataclass(frozen=True)
class StageLimits:
    """Seconds each stage may take, and each job in it (from its start record to its result)."""

    smoke_s: float = 120.0          # compiling the smoke kernels (in parallel, cold cache) and running them
    measure_s: float = 270.0        # every chain's plans and PyTorch eager, then torch.compile while it lasts
    sanitize_s: float = 60.0        # compute-sanitizer, all runs together
    smoke_kernel_s: float = 20.0
    kernel_s: float = 30.0          # one plan checked and timed
    compile_job_s: float = 90.0     # one torch.compile, first call included
    sanitizer_run_s: float = 20.0

    def total_s(self) -> float:
        return self.smoke_s + self.measure_s + self.sanitize_s


@dataclass(frozen=True)
class DeviceRunOptions:
    chains: tuple[str, ...]
    results: str                     # the JSON-lines file (appended to)
    work_dir: str                    # libraries, job files, child logs (not returned)
    topk: int = 4
    dtype: str = "fp16"
    reps: int = 25
    limits: StageLimits = field(default_factory=StageLimits)
    sanitize: bool = True
    rerun: bool = False
    repro_dir: str = ""              # rerun: where the failing kernels' reproducers go
    max_repros: int = 8


def compile_plan(k: PlannedKernel, dtype: str) -> tuple[str, str]:
    """(library, launcher) of one plan's kernel; RuntimeError with nvcc's last line if it fails."""
    source, names = emit_library(k.chain, [(k.rank, k.plan)], dtype=dtype)
    built = compile_cuda(source, shared=True)
    if not built.ok:
        raise RuntimeError("nvcc failed: " + (built.log.strip().splitlines() or ["?"])[-1][:300])
    return built.output, names[k.rank]


def chain_facts(planned, chains, dtype: str) -> list[Record]:
    """What the summary needs of each chain besides the GPU's results (the model's side)."""
    device, out = Device(), []
    for name in chains:
        chain = parse_chain(name)
        mine = [k for k in planned if k.chain.name == chain.name]
        plans = {str(k.rank): {"plan": k.plan.summary().strip(), "predicted_us": k.plan.cost * 1e6,
                               "volumes": {lv: float(v) for lv, v in k.plan.volumes.items()},
                               "cluster_size": k.plan.blocks, "occupancy": float(k.plan.occupancy)} for k in mine}
        data = {"dims": list(chain.dims), "flops": float(chain.flops()), "dtype": dtype,
                "predicted_unfused_us": unfused(chain, device).cost * 1e6,
                "bottleneck": mine[0].plan.bottleneck if mine else "-", "plans": plans}
        out.append(Record("chain", chain.name, chain=chain.name, data=data))
    return out


def _job(k: PlannedKernel, stage: str, opts: DeviceRunOptions, built: Future, timeout_s: float,
         results: str, wait_s: float) -> KernelJob | None:
    """The job of a planned kernel once its library is built; None (and a failure recorded) if it is not."""
    key_job = KernelJob(stage, k.chain.name, k.rank, opts.dtype, opts.reps, timeout_s, k.path,
                        launch=k.launch.to_json())
    try:
        library, symbol = built.result(timeout=max(0.0, wait_s))
    except (RuntimeError, OSError, TimeoutError) as err:
        why = str(err) or "nvcc did not finish within the stage's time"
        append(results, Record("done", key_job.key, stage, k.chain.name, k.rank, k.path, "error", why,
                               launch=key_job.launch))
        return None
    return KernelJob(stage, k.chain.name, k.rank, opts.dtype, opts.reps, timeout_s, k.path, library, symbol,
                     k.launch.to_json())


def run_device(opts: DeviceRunOptions, progress=print) -> list[Record]:
    """Every stage; returns all records of the results file."""
    os.makedirs(opts.work_dir, exist_ok=True)
    lim, res = opts.limits, opts.results
    before = final_results(read_records(res)) if opts.rerun else {}
    failed = {k for k, r in before.items() if r.status != "ok"}
    passed_paths = {r.path for r in before.values() if r.stage == "smoke" and r.status == "ok"}
    skipped: list = []
    planned = planned_kernels([parse_chain(c) for c in opts.chains], opts.topk, opts.dtype, skipped=skipped)
    if not opts.rerun:
        for rec in chain_facts(planned, opts.chains, opts.dtype):
            append(res, rec)
        for s in skipped:
            append(res, Record("done", f"measure:{s.chain.name}:{s.rank}", "measure", s.chain.name, s.rank, "",
                               "skipped", f"not generated: {s.reason}"))
    picks = smoke_picks(planned)
    if opts.rerun:
        picks = [k for k in picks if f"smoke:{k.chain.name}:{k.rank}" in failed]
        planned = [k for k in planned if f"measure:{k.chain.name}:{k.rank}" in failed]
        write_repros([r for r in before.values() if r.status != "ok" and r.launch], planned + picks,
                     opts, progress)
    progress(f"plans: {len(planned)} kernels to measure over {len(opts.chains)} chains; smoke: {len(picks)} code paths")
    pool = ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 2))
    try:
        builds = {(k.chain.name, k.rank): pool.submit(compile_plan, k, opts.dtype) for k in picks}
        for k in planned:
            builds.setdefault((k.chain.name, k.rank), pool.submit(compile_plan, k, opts.dtype))
        checked = (picks + planned)[:opts.max_repros] if opts.rerun else picks   # what compute-sanitizer runs
        exes = {}
        if opts.sanitize and find_sanitizer():
            folder = os.path.join(opts.work_dir, "sanitize")
            os.makedirs(folder, exist_ok=True)
            exes = {(k.chain.name, k.rank): pool.submit(build_reproducer, k.chain, k.plan, folder,
                                                        f"{k.chain.name}_r{k.rank}", opts.dtype) for k in checked}
        # --- smoke: one launch per code path
        t0 = time.monotonic()
        deadline = t0 + lim.smoke_s
        append(res, Record("stage", "smoke", data={"paths": len(picks), "limit_s": lim.smoke_s}))
        jobs = [KernelJob("env", "-", timeout_s=60.0)] if "env:-:0" in failed or not opts.rerun else []
        for k in picks:
            job = _job(k, "smoke", opts, builds[(k.chain.name, k.rank)], lim.smoke_kernel_s, res,
                       deadline - 20 - time.monotonic())
            jobs += [job] if job else []
        smoke = run_jobs(jobs, res, opts.work_dir, deadline, progress).records
        passed_paths |= {r.path for r in smoke if r.stage == "smoke" and r.status == "ok"}
        why_path = {r.path: f"{r.status}: {r.reason}" for r in smoke if r.stage == "smoke" and r.status != "ok"}
        progress(f"smoke: {len(passed_paths)} code paths passed, {len(why_path)} failed in "
                 f"{time.monotonic() - t0:.0f} s")
        # --- measurement: PyTorch eager and the plans whose code path passed, chain by chain
        t1 = time.monotonic()
        deadline = t1 + lim.measure_s
        append(res, Record("stage", "measure", data={"kernels": len(planned), "limit_s": lim.measure_s}))
        jobs = []
        for name in opts.chains:
            chain = parse_chain(name).name
            if not opts.rerun or f"eager:{chain}:0" in failed:
                jobs.append(KernelJob("eager", chain, 0, opts.dtype, opts.reps, lim.kernel_s))
            for k in (k for k in planned if k.chain.name == chain):
                if k.path not in passed_paths:
                    reason = why_path.get(k.path, "its smoke kernel did not run")
                    append(res, Record("done", f"measure:{chain}:{k.rank}", "measure", chain, k.rank, k.path,
                                       "skipped", f"code path '{k.path}' failed its smoke run ({reason})",
                                       launch=k.launch.to_json()))
                    continue
                job = _job(k, "measure", opts, builds[(chain, k.rank)], lim.kernel_s, res,
                           deadline - time.monotonic())
                jobs += [job] if job else []
        run_jobs(jobs, res, opts.work_dir, deadline, progress)
        progress(f"measurement: {len(jobs)} jobs in {time.monotonic() - t1:.0f} s")
        # --- compute-sanitizer on the smoke kernels
        if opts.sanitize:
            run_sanitizers(checked, exes, opts, progress)
        # --- torch.compile while the measurement's budget lasts
        jobs = [KernelJob("compile", parse_chain(n).name, 0, opts.dtype, opts.reps, lim.compile_job_s)
                for n in opts.chains if not opts.rerun or f"compile:{parse_chain(n).name}:0" in failed]
        run_jobs(jobs, res, opts.work_dir, max(deadline, time.monotonic() + 1), progress)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)    # builds no stage waits for are dropped
    return read_records(res)


def run_sanitizers(kernels, exes: dict, opts: DeviceRunOptions, progress, parallel: int = 4) -> None:
    """memcheck on each kernel's standalone reproducer (built ahead in ``exes``), then racecheck, a few at
    once on the GPU, within the stage's cap; a kernel the cap leaves out is recorded as skipped."""
    tool = find_sanitizer()
    if tool is None:
        progress("compute-sanitizer not found (PATH, /usr/local/cuda/bin): sanitizer stage skipped")
        append(opts.results, Record("sanitize", "skipped", reason="compute-sanitizer not found"))
        return
    lim = opts.limits
    deadline = time.monotonic() + lim.sanitize_s

    def one(tool_name: str, k: PlannedKernel) -> None:
        left = deadline - time.monotonic()
        if left < 5:
            status, reason = "skipped", "the sanitizer stage's time cap was spent"
        else:
            try:
                exe = exes[(k.chain.name, k.rank)].result(timeout=left)
                run = sanitize(tool, tool_name, exe, min(lim.sanitizer_run_s, max(1.0, deadline - time.monotonic())))
                status, reason = run.status, run.reason
            except (RuntimeError, OSError, KeyError) as err:
                status, reason = "error", str(err)[:300]
            except TimeoutError:
                status, reason = "skipped", "its reproducer was not built within the cap"
        append(opts.results, Record("sanitize", tool_name, chain=k.chain.name, rank=k.rank, path=k.path,
                                    status=status, reason=reason, launch=k.launch.to_json()))
        progress(f"{tool_name} {k.path} ({k.chain.name} #{k.rank}): {status} {reason}")

    with ThreadPoolExecutor(max_workers=parallel) as runs:
        list(runs.map(lambda job: one(*job), [(t, k) for t in ("memcheck", "racecheck") for k in kernels]))


def write_repros(failures, planned, opts: DeviceRunOptions, progress) -> None:
    """For each failing kernel (up to ``max_repros``): its launch parameters and a reproducer (.cu) with the
    command lines that build and run it, in ``repro_dir``."""
    if not opts.repro_dir:
        return
    os.makedirs(opts.repro_dir, exist_ok=True)
    by_key = {(k.chain.name, k.rank): k for k in planned}
    lines = ["# Failing kernels of the first run: launch parameters and reproducers", ""]
    for r in failures[:opts.max_repros]:
        k = by_key.get((r.chain, r.rank))
        launch = LaunchParams.from_json(r.launch)
        lines += [f"## {r.key}: {r.status}", "", f"* why: {r.reason}", f"* launch: {launch.line()}"]
        if k is not None:
            stem = f"{r.chain}_r{r.rank}"
            with open(os.path.join(opts.repro_dir, f"{stem}.cu"), "w", encoding="utf-8") as f:
                f.write(emit_reproducer(k.chain, k.plan, dtype=opts.dtype))
            build = " ".join(build_command(f"{stem}.cu", stem))
            lines += [f"* reproducer: `{stem}.cu`; build and run: `{build} && ./{stem}`",
                      f"* under memcheck: `compute-sanitizer --tool memcheck ./{stem}`"]
        lines.append("")
    if len(failures) > opts.max_repros:
        lines.append(f"({len(failures) - opts.max_repros} more failing kernels not written)")
    with open(os.path.join(opts.repro_dir, "failures.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    progress(f"wrote {min(len(failures), opts.max_repros)} failing kernels' reproducers to {opts.repro_dir}")
