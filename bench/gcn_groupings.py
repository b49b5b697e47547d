"""GCN FLOPs vs memory accesses over fusion groupings beyond Figure 14's.

    .venv/bin/python bench/gcn_groupings.py [--dataset karate] [--plot docs/gcn_groupings.png]

Figure 14's configurations (unfused, one layer fused, both layers, full) are the GCN presets
`layer1`, `layer2`, `partial`, `full`, run by the figure12 suite on its datasets. This bench adds
the groupings between them: pairs of ops around each product, and layer 1 with layer 2's
aggregation. Every run is verified; FLOPs and memory are normalised to unfused.
"""
from __future__ import annotations

import argparse

from fuseflow.ir.program import op_output
from fuseflow.models.registry import build
from fuseflow.schedule.schedule import Schedule
from fuseflow.studies.granularity import fusion_study


def groupings(case) -> dict[str, str]:
    names = [op_output(op) for op in case.program.ops]
    layer1, layer2 = Schedule.parse(case.presets["partial"]).partition(case.program)
    assert layer2[0] == names[len(layer1)]  # layer 2 starts with its aggregation A·H
    pairs = [names[i:i + 2] for i in range(0, len(names), 2)]

    def fmt(groups):
        return "fusion=" + "".join("[" + ",".join(g) + "]" for g in groups) + " layout=induced"

    presets = {name: case.presets[name] for name in ("unfused", "layer1", "layer2", "partial", "full")}
    return {**presets, "pairs": fmt(pairs), "layer1+aggregation": fmt([layer1 + layer2[:1], layer2[1:]])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="karate")
    ap.add_argument("--plot")
    args = ap.parse_args()
    case = build("gcn", args.dataset)
    schedules = groupings(case)
    case.presets.update(schedules)
    rows = fusion_study(case, list(schedules))
    print(f"{'grouping':20} {'kernels':>7} {'cycles':>10} {'FLOPs/unf':>9} {'mem/unf':>8} verified")
    for r in rows:
        print(f"{r.schedule:20} {r.kernels:7d} {r.cycles:10,d} {r.flops_ratio:9.2f} {r.mem_ratio:8.2f} {r.verdict}")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(5, 4))
        for r in rows:
            ax.scatter(r.mem_ratio, r.flops_ratio)
            ax.annotate(r.schedule, (r.mem_ratio, r.flops_ratio), fontsize=8)
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel("memory accesses / unfused"), ax.set_ylabel("FLOPs / unfused")
        ax.set_title(f"GCN on {args.dataset}: fusion groupings")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)


if __name__ == "__main__":
    main()
