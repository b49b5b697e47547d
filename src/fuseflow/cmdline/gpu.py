"""Command line: ``fuseflow gpu plan``, ``gpu run``, ``gpu bench [--run]``, and for a GPU run's results
``gpu rerun`` (only what failed) and ``gpu summarize`` (the report from the result lines, no GPU needed).

The lead's fuseflow.cli calls :func:`add_commands` with its top-level subparsers; ``python -m
fuseflow.cmdline.gpu`` runs the same commands without the rest of fuseflow (what a GPU machine needs).

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="fuseflow")
    >>> add_commands(parser.add_subparsers(dest="command", required=True))
    >>> args = parser.parse_args(["gpu", "plan", "--chain", "G1", "--topk", "2"])
    >>> args.topk, args.run is cmd_plan
    (2, True)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import shutil
import signal
import sys
import tempfile
import time

from ..errors import FuseflowError, NotSupported, UserError
from ..files import check_output, read_file, write_text
from ..gpu.kernels.codegen import emit_cuda, supported
from ..gpu.kernels.kernel_layout import DTYPES
from ..gpu.measuring.device_run import DeviceRunOptions, StageLimits, run_device
from ..gpu.measuring.kernel_runner import measure_chain, measure_compiled, require_cuda
from ..gpu.measuring.measurements import format_measured_table, summary_lines
from ..gpu.measuring.result_log import read_records
from ..gpu.measuring.result_summary import summarize_run
from ..gpu.planning.baselines import smem_only, unfused
from ..gpu.planning.planner import DEFAULT_TOPK, plan_chain
from ..gpu.planning.predicted_bench import format_summary, format_table, run_bench, summarize
from ..gpu.problem.benchmarks import BENCHMARKS, parse_chain
from ..gpu.problem.chains import ATOM
from ..gpu.problem.device import LEVELS, Device, load_device
from ..gpu.readout.measured_section import GpuInfo, build_report, device_slug, replace_section
from ..gpu.readout.units import fmt_bytes, fmt_count

PLAN_COLUMNS = """\
columns (one row per plan, best first; the chain is C = act(A·B), E = C·D with A MxK, B KxN, D NxL):
  schedule     [spatial dims] temporal loops, outer to inner (spatial dims map to the grid of clusters)
  strat        strategy: standard, or for gated chains sequential/spatial
  cls m,n,k,l  cluster shape: thread blocks per cluster along M, N, K, L
  blk m,n,k,l  block tile: elements per thread block along M, N, K, L
  sh,red       shuffle group (cls_l/cls_k) and reduce groups (cls_n·cls_k/cls_l) of the DSM exchange
  C, E_acc     where C or the E accumulator is held across a loop (reg, smem, dsm, global);
               "-" when it is not held (only the current tile)
  global l2 dsm smem reg
               bytes moved at each memory level over the whole kernel (global: HBM; dsm:
               distributed shared memory between the blocks of a cluster)
  time us      predicted time: the slowest level (bytes / bandwidth at the plan's occupancy), or
               tensor-core time when that is slower (not with --memory-only)
  bound        the level (or compute) that sets the time
baselines: unfused (two kernels, C through global memory) and SMEM-only fusion (one block holds
everything, or it fails and runs unfused). docs/gpu.md explains the model."""


def add_commands(subparsers) -> None:
    """Register ``gpu plan`` and ``gpu bench`` under a ``gpu`` command."""
    gpu = subparsers.add_parser("gpu", help="plan GEMM->act->GEMM fusion across GPU thread-block clusters (DSM)")
    sub = gpu.add_subparsers(dest="gpu_command", required=True, metavar="{plan,run,bench,rerun,summarize}")

    p = sub.add_parser("plan", help="rank fused plans of one chain", epilog=PLAN_COLUMNS,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chain", required=True,
                   help="benchmark id (G1-G10, S1-S8, C1-C8) or ffn:M,N,K,L[:act], gated:M,N,K,L[:strategy], "
                        "conv:IC,HW,OC1,OC2,k1[,batch]")
    p.add_argument("--topk", type=int, default=DEFAULT_TOPK, help=f"plans to print (default {DEFAULT_TOPK})")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--device", metavar="FILE", help="JSON or TOML file overriding H100 SXM parameters")
    p.add_argument("--memory-only", action="store_true",
                   help="rank by memory levels only (the paper's cost model, no tensor-core term)")
    p.add_argument("--emit-cuda", metavar="FILE.cu", help="write a CUDA source for the best plan")
    p.set_defaults(run=cmd_plan)

    _add_run_parser(sub)
    rr = sub.add_parser("rerun", help="run again only what a GPU run's result lines record as failed, with "
                                      "each failing kernel's launch parameters and a reproducer")
    rr.add_argument("--results", required=True, metavar="FILE.jsonl", help="the first run's results.jsonl")
    rr.add_argument("--chains", help="comma-separated ids of the first run (default: all 26)")
    _add_device_run_options(rr)
    rr.set_defaults(run=cmd_rerun)
    sm = sub.add_parser("summarize", help="the measured table, device file and docs section from a run's result "
                                          "lines, complete or not (no GPU needed)")
    sm.add_argument("--results", required=True, metavar="FILE.jsonl")
    sm.add_argument("--out", metavar="DIR", default=".", help="folder for measured.json, measured.md, the device file")
    sm.add_argument("--docs", metavar="FILE.md", help="page whose measured section is rewritten (docs/gpu.md)")
    sm.set_defaults(run=cmd_summarize)
    b = sub.add_parser("bench", help="best plan vs unfused and SMEM-only fusion for the 26 benchmark chains")
    b.add_argument("--chains", help="comma-separated ids (default: all 26)")
    b.add_argument("--json", action="store_true", help="machine-readable output")
    b.add_argument("--device", metavar="FILE", help="JSON or TOML file overriding H100 SXM parameters")
    b.add_argument("--memory-only", action="store_true", help="rank by memory levels only")
    b.add_argument("--run", action="store_true", dest="measure",
                   help="run every chain's kernels on this GPU in stages (smoke, measurement, compute-sanitizer, "
                        "torch.compile) and write the measured table (needs CUDA)")
    _add_device_run_options(b)
    b.set_defaults(run=cmd_bench)


def _add_device_run_options(p) -> None:
    limits = StageLimits()
    p.add_argument("--topk-measure", type=int, default=4, help="plans measured per chain with --run (default 4)")
    p.add_argument("--dtype", choices=DTYPES, default="fp16")
    p.add_argument("--reps", type=int, default=25, help="timed runs per kernel (at least 20; default 25)")
    p.add_argument("--budget-s", type=float, default=limits.measure_s,
                   help=f"seconds for the measurement and torch.compile (default {limits.measure_s:.0f})")
    p.add_argument("--smoke-s", type=float, default=limits.smoke_s,
                   help=f"seconds for the smoke stage, its compiles included (default {limits.smoke_s:.0f})")
    p.add_argument("--sanitize-s", type=float, default=limits.sanitize_s,
                   help=f"seconds for compute-sanitizer, all runs (default {limits.sanitize_s:.0f}; 0: skip)")
    p.add_argument("--kernel-timeout-s", type=float, default=limits.kernel_s,
                   help=f"seconds one plan may take to be checked and timed (default {limits.kernel_s:.0f}; the "
                        f"smoke's is {limits.smoke_kernel_s:.0f})")
    p.add_argument("--out", metavar="DIR", default=".",
                   help="folder for results.jsonl (appended as results arrive) and the report files")
    p.add_argument("--docs", metavar="FILE.md", help="page whose measured section is rewritten (docs/gpu.md)")


def _add_run_parser(sub) -> None:
    r = sub.add_parser("run", help="compile, run, check and time one chain's fused kernel on this GPU")
    r.add_argument("--chain", required=True, help="benchmark id or chain, as for `gpu plan`")
    r.add_argument("--plan", type=int, metavar="K", help="run the planner's K-th plan only (default 1)")
    r.add_argument("--topk-measure", type=int, default=1, help="run the top K plans (default 1)")
    r.add_argument("--dtype", choices=DTYPES, default="fp16")
    r.add_argument("--reps", type=int, default=25, help="timed runs (at least 20; default 25)")
    r.add_argument("--no-compile", action="store_true", help="leave out the torch.compile baseline")
    r.add_argument("--json-out", metavar="FILE.json", help="write the measurement as JSON")
    r.set_defaults(run=cmd_run)


# measured peak memory of `plan` per combination of tile choices (S6: 11,520 combinations, 16384^4:
# 14,641, 65536^2 x 8192^2: 16,900 -> 11 to 21 KB each, above the interpreter's own ~90 MB)
BYTES_PER_TILE_COMBINATION = 32 * 1024


def _divisors(n: int) -> int:
    """How many whole numbers divide n (trial division up to its square root)."""
    count, d = 0, 1
    while d * d <= n:
        if n % d == 0:
            count += 1 if d * d == n else 2
        d += 1
    return count


def tile_combinations(chain) -> int:
    """Tiles the planner enumerates for `chain`: per padded extent the multiples of the 16-wide
    atom that divide it, multiplied over the four extents (without enumerating them).

    >>> tile_combinations(parse_chain("S6"))
    11520
    """
    combos = 1
    for extent in chain.padded:
        combos *= _divisors(extent // ATOM)
    return combos


def check_plan_size(chain, budget) -> None:
    """Refuse a chain whose plan search would not fit the memory budget, before searching."""
    from ..memory import Budget  # noqa: PLC0415 - psutil only where a plan search is sized, not in a GPU run
    combos = tile_combinations(chain)
    (budget or Budget()).check(combos * BYTES_PER_TILE_COMBINATION,
                               f"plan search of {chain.name} ({combos:,} tile combinations)")


def _budget(args):
    from ..memory import Budget  # noqa: PLC0415 - as in check_plan_size
    return Budget(args.max_memory) if getattr(args, "max_memory", None) else None


def cmd_plan(args) -> int:
    if args.topk < 1:
        raise UserError(f"--topk must be at least 1, got {args.topk}", "command line")
    if args.emit_cuda:
        check_output(args.emit_cuda, "--emit-cuda", (".cu", ".cuh"))
    chain = parse_chain(args.chain)
    device = load_device(args.device)
    check_plan_size(chain, _budget(args))
    compute = not args.memory_only
    result = plan_chain(chain, device, topk=args.topk, compute=compute)
    if not result.plans:
        raise UserError(f"no plan of {chain.name} fits the device", args.device or "device",
                        "give the device more shared memory or registers")
    base = [unfused(chain, device, compute), smem_only(chain, device, compute)]
    emitted = None
    if args.emit_cuda:
        reasons = [supported(chain, p, device) for p in result.plans]
        if all(reasons):
            raise NotSupported(f"no listed plan can be emitted as CUDA: {reasons[0]}", "--emit-cuda",
                               "raise --topk")
        emitted = reasons.index(None)
        write_text(args.emit_cuda, emit_cuda(chain, result.plans[emitted], device=device), "--emit-cuda")
    if args.json:
        data = result.to_json()
        data["device"] = device.name
        data["baselines"] = [b.to_json() for b in base]
        print(json.dumps(data, indent=1))
        return 0
    print(f"chain {chain.describe()}   device {device.name}")
    print("pruning: " + " -> ".join(f"{k} {fmt_count(v)}" for k, v in result.counts.items())
          + f"   (ranked in {result.seconds:.2f} s)")
    print(f"{'#':>2} {'schedule':<11} {'strat':<5} {'cls m,n,k,l':<11} {'blk m,n,k,l':<16} {'sh,red':<6} "
          f"{'C':<6} {'E_acc':<6} " + " ".join(f"{lv:>9}" for lv in LEVELS) + f" {'time us':>8} bound")
    for i, p in enumerate(result.plans, 1):
        sh, cr = p.shuffle_reduce
        print(f"{i:>2} {p.schedule.name:<11} {p.strategy[:5]:<5} {','.join(map(str, p.cls)):<11} "
              f"{','.join(map(str, p.blk)):<16} {f'{sh},{cr}':<6} {p.placement['C']:<6} {p.placement['E_acc']:<6} "
              + " ".join(f"{fmt_bytes(p.volumes[lv]):>9}" for lv in LEVELS)
              + f" {p.cost * 1e6:>8.2f} {p.bottleneck}")
    for b in base:
        label = b.name + ("" if b.name == "unfused" else (" (fused)" if b.fused else " (fails: runs unfused)"))
        print(f"baseline {label:<30} global {fmt_bytes(b.volumes['global']):>9}  l2 {fmt_bytes(b.volumes['l2']):>9}"
              f"  time {b.cost * 1e6:.2f} us")
    if emitted is not None:
        print(f"wrote {args.emit_cuda} (plan #{emitted + 1})")
    return 0


def _check_counts(args) -> None:
    if args.reps < 20:
        raise UserError(f"--reps must be at least 20 (a median of 20 timed runs), got {args.reps}", "command line")
    if args.topk_measure < 1 or (getattr(args, "plan", None) is not None and args.plan < 1):
        raise UserError("--topk-measure and --plan must be at least 1", "command line")


def cmd_run(args) -> int:
    _check_counts(args)
    if args.json_out:
        check_output(args.json_out, "--json-out", (".json",))
    chain = parse_chain(args.chain)
    row = measure_chain(chain, topk=args.topk_measure, dtype=args.dtype, reps=args.reps, only_rank=args.plan)
    if not args.no_compile:
        row = row.with_compiled(measure_compiled(chain, args.dtype, args.reps))
    if args.json_out:
        write_text(args.json_out, json.dumps(row.to_json(), indent=1), "--json-out")
    print(format_measured_table([row]))
    for p in row.plans:
        state = f"{p.timing.median_us:.1f} us" if p.timing else p.error
        print(f"plan #{p.rank}: {state}, max err {p.max_error:.1e}, predicted {p.predicted_us:.1f} us  {p.plan}")
    return 0


def _gpu_info(facts: dict | None) -> GpuInfo:
    """The GPU the run recorded (its env job), or a placeholder where the run ended before it."""
    if not facts:
        base = Device()
        return GpuInfo("unknown GPU (the run recorded no GPU facts)", base.sms, base.l2_bytes, math.nan, "?", "?")
    return GpuInfo(facts["name"], facts["sms"], facts["l2_bytes"], facts["copy_bandwidth"], facts["torch_version"],
                   facts["nvcc_version"])


def _chains(args) -> tuple[str, ...]:
    chains = tuple(c.strip().upper() for c in args.chains.split(",")) if args.chains else tuple(BENCHMARKS)
    unknown = [c for c in chains if c not in BENCHMARKS]
    if unknown:
        raise UserError(f"unknown benchmark chain {unknown[0]!r}", "--chains", "use ids G1-G10, S1-S8, C1-C8")
    return chains


def _docs_page(args) -> str | None:
    page = read_file(args.docs, "--docs").decode("utf-8") if args.docs else None
    if page is not None:
        replace_section(page, "")                # a page without the section is refused before the run
    return page


def write_summary(results: str, out: pathlib.Path, docs: str | None, page: str | None) -> int:
    """measured.json, measured.md, the fitted device file and the docs section from the result lines."""
    run = summarize_run(read_records(results))
    if not run.rows:
        raise UserError(f"{results} holds no chain records: nothing to summarize", "--results")
    gpu = _gpu_info(run.gpu)
    report = build_report(run.rows, gpu)
    state = "complete" if run.complete else "partial: some jobs have no result (the run was cut short)"
    checks = ["", f"Run: {state}.", "", *[f"* {line}" for line in run.checks]]
    markdown = report.markdown + "\n" + "\n".join(checks)
    slug = device_slug(gpu.name) if run.gpu else "unknown_gpu"
    out.mkdir(parents=True, exist_ok=True)
    write_text(str(out / "measured.json"), json.dumps([r.to_json() for r in run.rows], indent=1), "--out")
    write_text(str(out / "measured.md"), markdown + "\n", "--out")
    write_text(str(out / f"{slug}.toml"), report.device_file, "--out")
    if page is not None:
        write_text(docs, replace_section(page, markdown), "--docs")
    print(format_measured_table(run.rows))
    print("\n".join(summary_lines(run.rows) + run.checks))
    print(f"run {state}; wrote {out / 'measured.json'}, {out / 'measured.md'}, {out / (slug + '.toml')}"
          + (f" and the measured section of {docs}" if docs else ""))
    return 0


def _device_run(args, rerun: bool) -> int:
    _check_counts(args)
    chains = _chains(args)
    page = _docs_page(args)
    require_cuda("gpu rerun" if rerun else "gpu bench --run")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = str(out / "results.jsonl")
    if rerun and os.path.abspath(args.results) != os.path.abspath(results):
        read_file(args.results, "--results")    # a missing file is refused in one line
        shutil.copyfile(args.results, results)
    # a `timeout` of the whole run ends it like an error would: the watchdog kills its child on the way out
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    limits = StageLimits(smoke_s=args.smoke_s, measure_s=args.budget_s, sanitize_s=args.sanitize_s,
                         kernel_s=args.kernel_timeout_s)
    with tempfile.TemporaryDirectory() as work:
        opts = DeviceRunOptions(chains, results, work, args.topk_measure, args.dtype, args.reps, limits,
                                sanitize=args.sanitize_s > 0, rerun=rerun,
                                repro_dir=str(out / "repro") if rerun else "")
        run_device(opts, progress=lambda line: print(line, flush=True))
    return write_summary(results, out, args.docs, page)


def cmd_bench_run(args) -> int:
    return _device_run(args, rerun=False)


def cmd_rerun(args) -> int:
    return _device_run(args, rerun=True)


def cmd_summarize(args) -> int:
    read_file(args.results, "--results")
    return write_summary(args.results, pathlib.Path(args.out), args.docs, _docs_page(args))


def cmd_bench(args) -> int:
    if args.measure:
        return cmd_bench_run(args)
    device = load_device(args.device)
    chains = [c.strip() for c in args.chains.split(",") if c.strip()] if args.chains else None
    start = time.perf_counter()
    rows = run_bench(device, chains, compute=not args.memory_only)
    summary = summarize(rows)
    seconds = time.perf_counter() - start
    if args.json:
        print(json.dumps({"device": device.name, "rows": [r.to_json() for r in rows], "summary": summary,
                          "seconds": seconds}, indent=1))
        return 0
    print(f"device {device.name}; traffic in MiB (DRAM = global memory, L2 = all SM<->L2 requests); "
          f"times predicted in microseconds")
    print(format_table(rows))
    print(format_summary(summary))
    print(f"bench ran in {seconds:.1f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m fuseflow.cmdline.gpu plan|run|bench ...``: errors as one line, exit 2."""
    parser = argparse.ArgumentParser(prog="fuseflow")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["gpu", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.run(args)
    except FuseflowError as err:
        print(f"fuseflow: error: {err.one_line()}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
