"""Command line: ``fuseflow gpu plan`` and ``fuseflow gpu bench``.

The lead's fuseflow.cli calls :func:`add_commands` with its top-level subparsers.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="fuseflow")
    >>> add_commands(parser.add_subparsers(dest="command", required=True))
    >>> args = parser.parse_args(["gpu", "plan", "--chain", "G1", "--topk", "2"])
    >>> args.topk, args.run is cmd_plan
    (2, True)
"""
from __future__ import annotations

import json
import time

from fuseflow.errors import NotSupported, UserError
from fuseflow.files import check_output, write_text
from fuseflow.memory import Budget

from .baselines import smem_only, unfused
from .bench import format_summary, format_table, run_bench, summarize
from .benchmarks import parse_chain
from .chains import ATOM
from .codegen import emit_cuda, supported
from .device import LEVELS, load_device
from .planner import DEFAULT_TOPK, plan_chain
from .report import fmt_bytes, fmt_count


def add_commands(subparsers) -> None:
    """Register ``gpu plan`` and ``gpu bench`` under a ``gpu`` command."""
    gpu = subparsers.add_parser("gpu", help="plan GEMM->act->GEMM fusion across GPU thread-block clusters (DSM)")
    sub = gpu.add_subparsers(dest="gpu_command", required=True, metavar="{plan,bench}")

    p = sub.add_parser("plan", help="rank fused plans of one chain")
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

    b = sub.add_parser("bench", help="best plan vs unfused and SMEM-only fusion for the 26 benchmark chains")
    b.add_argument("--chains", help="comma-separated ids (default: all 26)")
    b.add_argument("--json", action="store_true", help="machine-readable output")
    b.add_argument("--device", metavar="FILE", help="JSON or TOML file overriding H100 SXM parameters")
    b.add_argument("--memory-only", action="store_true", help="rank by memory levels only")
    b.set_defaults(run=cmd_bench)


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
    combos = tile_combinations(chain)
    (budget or Budget()).check(combos * BYTES_PER_TILE_COMBINATION,
                               f"plan search of {chain.name} ({combos:,} tile combinations)")


def _budget(args):
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


def cmd_bench(args) -> int:
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
