"""Block-size study: tile-valued (blocked) against scalar execution of BigBird attention.

    python bench/block_sizes.py                 # seq 512, d 64, one fused kernel, B = 16/32/64
    python bench/block_sizes.py --seq 1024      # the reference's sequence length (slow scalar runs)
    python bench/block_sizes.py --plot docs/block_sizes.png

For each B the attention head `softmax(Q·Kᵀ/√d masked by M)·V` runs on the BigBird mask of
block B (so the mask's density changes with B, as in the reference's experiment), once scalar
("unblocked": every entry a token) and once blocked (`block=B`: BxB tiles on the streams, the
reference's true-block latencies from HwConfig). Printed per run: cycles, FLOPs, memory words
(reads + writes), token events and wall time, and the blocked/scalar ratios, all measured in this
one run on the fast engine; each run's outputs are verified against the numpy reference.
Not a test: pytest does not collect this directory.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))


def study(seq: int, d: int, blocks: list[int], fusion: str, engine: str) -> list[dict]:
    from fuseflow.models.attention import bigbird_attention
    from fuseflow.pipeline import simulate

    rows = []
    for b in blocks:
        program, inputs = bigbird_attention(seq, d, b)
        density = float(inputs["M"].mean())
        for label, schedule in (("unblocked", fusion), (f"B={b}", f"{fusion} block={b}")):
            start = time.perf_counter()
            r = simulate(program, schedule, inputs, engine=engine)
            rows.append({"mask_block": b, "density": density, "run": label, "schedule": r.schedule,
                         "cycles": r.cycles, "flops": r.flops, "mem": r.mem_reads + r.mem_writes,
                         "tokens": r.tokens, "verified": r.verified, "wall": time.perf_counter() - start})
            print(f"  {label:<10} mask b{b} ({density:.1%}): {r.cycles:>13,} cycles  "
                  f"{time.perf_counter() - start:6.1f} s", file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> str:
    head = (f"{'mask':<6} {'density':>7} {'run':<10} {'cycles':>13} {'FLOPs':>13} {'memory words':>13} "
            f"{'tokens':>12} {'speedup':>8} {'FLOPs/scalar':>12} {'mem/scalar':>10} {'verified':>8}")
    lines = [head]
    base = {}
    for r in rows:
        if r["run"] == "unblocked":
            base[r["mask_block"]] = r
        s = base[r["mask_block"]]
        lines.append(f"b{r['mask_block']:<5} {r['density']:>7.1%} {r['run']:<10} {r['cycles']:>13,} {r['flops']:>13,} "
                     f"{r['mem']:>13,} {r['tokens']:>12,} {s['cycles'] / r['cycles']:>7.1f}x "
                     f"{r['flops'] / s['flops']:>12.2f} {r['mem'] / s['mem']:>10.3f} {str(r['verified']):>8}")
    return "\n".join(lines)


def plot(rows: list[dict], path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    blocks = sorted({r["mask_block"] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    width = 0.38
    for k, run in enumerate(("unblocked", "blocked")):
        pick = [next(r for r in rows if r["mask_block"] == b and (r["run"] == "unblocked") == (run == "unblocked"))
                for b in blocks]
        xs = [i + (k - 0.5) * width for i in range(len(blocks))]
        axes[0].bar(xs, [r["cycles"] for r in pick], width, label=run)
        axes[1].bar(xs, [r["mem"] for r in pick], width, label=run)
    for ax, title in zip(axes, ("cycles", "memory words (reads + writes)")):
        density = {r["mask_block"]: r["density"] for r in rows}
        ax.set_xticks(range(len(blocks)), [f"B={b}\nmask {density[b]:.0%}" for b in blocks])
        ax.set_yscale("log")
        ax.set_title(title)
        ax.legend(fontsize=8)
    speed = [next(r for r in rows if r["mask_block"] == b and r["run"] == "unblocked")["cycles"] /
             next(r for r in rows if r["mask_block"] == b and r["run"] != "unblocked")["cycles"] for b in blocks]
    for i, s in enumerate(speed):
        axes[0].annotate(f"{s:.0f}x faster", (i, 1), xycoords=("data", "axes fraction"), ha="center",
                         va="top", xytext=(0, -2), textcoords="offset points", fontsize=8,
                         bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    fig.suptitle(f"BigBird attention, seq {rows[0].get('seq', '')}: blocked vs scalar", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--blocks", default="16,32,64")
    ap.add_argument("--fusion", default="full", help="fusion granularity (full: one kernel)")
    ap.add_argument("--engine", default="fast", choices=("fast", "oracle"))
    ap.add_argument("--plot", help="write the figure to this file")
    ap.add_argument("--json", help="write the rows to this file")
    args = ap.parse_args(argv)
    blocks = [int(b) for b in args.blocks.split(",")]
    rows = study(args.seq, args.d, blocks, args.fusion, args.engine)
    for r in rows:
        r["seq"], r["d"] = args.seq, args.d
    print(f"BigBird attention, seq {args.seq}, d {args.d}, fusion {args.fusion}, engine {args.engine}")
    print(table(rows))
    if args.plot:
        print("plot:", plot(rows, args.plot))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
