"""Standard charts of a sweep database (matplotlib, Agg backend: no display needed).

- `cycles-<n>.png`: simulated cycles per schedule, one bar chart per (program, data point, seed),
  bars sorted by cycles, failed schedules marked, pruned ones left out;
- `heuristic-vs-simulated.png`: estimated vs simulated cycles of every simulated row (log-log),
  one colour per group, with each group's Spearman correlation in the legend.
"""
from __future__ import annotations

import math
import os
import re

from .analysis import groups


def _pyplot():
    import matplotlib  # noqa: PLC0415 - matplotlib is slow to import; only plots need it

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # noqa: PLC0415 - matplotlib is slow to import; only plots need it

    return plt


def _short(schedule: str, width: int = 48) -> str:
    text = re.sub(r"\s*layout=induced", " +ind", schedule)
    return text if len(text) <= width else text[:width - 1] + "…"


def cycles_chart(group, path: str) -> str:
    plt = _pyplot()
    rows = sorted((r for r in group.rows if r.get("status") == "ok" and r.get("cycles") is not None),
                  key=lambda r: r["cycles"])
    failed = [r for r in group.rows if r.get("status") == "error"]
    labels = [_short(r["schedule"]) for r in rows] + [_short(r["schedule"]) + " (failed)" for r in failed]
    values = [r["cycles"] for r in rows] + [0 for _ in failed]
    height = max(2.5, 0.28 * len(labels) + 1.2)
    fig, ax = plt.subplots(figsize=(9, height))
    colors = ["#2b7bba"] * len(rows) + ["#c0392b"] * len(failed)
    ax.barh(range(len(values)), values, color=colors)
    ax.set_yticks(range(len(values)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("simulated cycles")
    rho = group.spearman
    title = f"{group.program}  {group.data}  seed {group.seed}"
    if not math.isnan(rho):
        title += f"  (heuristic Spearman {rho:.2f})"
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def scatter_chart(all_groups, path: str) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 6))
    for g in all_groups:
        sim = g.simulated
        if not sim:
            continue
        rho = g.spearman
        label = f"{os.path.basename(g.program)} {g.data}" + ("" if math.isnan(rho) else f" ρ={rho:.2f}")
        ax.scatter([r["est_cycles"] for r in sim], [r["cycles"] for r in sim], s=14, label=label[:50])
    lo_hi = [v for g in all_groups for r in g.simulated for v in (r["est_cycles"], r["cycles"]) if v > 0]
    if lo_hi:
        lo, hi = min(lo_hi), max(lo_hi)
        ax.plot([lo, hi], [lo, hi], color="grey", linewidth=0.8, linestyle="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("heuristic estimate (cycles)")
    ax.set_ylabel("simulated cycles")
    ax.set_title("heuristic vs simulated cycles")
    if len(all_groups) <= 16:
        ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def draw(rows: list[dict], out_dir: str, max_bar_charts: int = 40) -> list[str]:
    """Write the standard charts for `rows` into `out_dir`; returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    all_groups = groups(rows)
    paths = []
    for n, g in enumerate(all_groups[:max_bar_charts]):
        if any(r.get("status") in ("ok", "error") for r in g.rows):
            paths.append(cycles_chart(g, os.path.join(out_dir, f"cycles-{n}.png")))
    if any(g.simulated for g in all_groups):
        paths.append(scatter_chart(all_groups, os.path.join(out_dir, "heuristic-vs-simulated.png")))
    return paths
