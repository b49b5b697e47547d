"""Charts of sweeps and studies (matplotlib, Agg backend: no display needed).

- `cycles-<n>.png`: simulated cycles per schedule, one bar chart per (program, data point, seed),
  bars sorted by cycles and labelled with the granularity they came from (`label`: a preset such
  as unfused/partial/full, or randomN) and their dataflow orders, each with its value; failed
  schedules marked, pruned ones left out;
- `heuristic-vs-simulated.png`: estimated vs simulated cycles of every simulated row (log-log),
  one colour per group, with each group's Spearman correlation in the legend;
- `study_chart`: a fusion study: speedup (higher is better) on its own axis, FLOPs and memory
  relative to the first schedule (lower is better) on another, every bar labelled.

    >>> bar_labels([{"label": "full", "schedule": "full layout=induced order=i,k,j"},
    ...             {"label": "full", "schedule": "full layout=induced order=k,i,j"},
    ...             {"label": "unfused", "schedule": "fusion=[t1][t2] layout=induced order.1=j,i"}])
    ['full  i,k,j', 'full  k,i,j', 'unfused  1:j,i']
"""
from __future__ import annotations

import math
import os
import re

from .analysis import groups

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7"]


def _pyplot():
    import matplotlib  # noqa: PLC0415 - matplotlib is slow to import; only plots need it

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # noqa: PLC0415 - matplotlib is slow to import; only plots need it

    return plt


def _short(schedule: str, width: int = 48) -> str:
    text = re.sub(r"\s*layout=induced", " +ind", schedule)
    return text if len(text) <= width else text[:width - 1] + "…"


def bar_labels(rows: list[dict]) -> list[str]:
    """Bar names: the row's granularity label (else its schedule, shortened) and its dataflow
    orders (`1:j,i` is group 1's); a name two rows share gets the schedule added."""
    names = []
    for row in rows:
        found = re.findall(r"order(?:\.(\d+))?=(\S+)", row["schedule"])
        orders = " ".join((f"{g}:" if g else "") + o for g, o in found)
        label = row.get("label") or _short(re.sub(r"\s*order(\.\d+)?=\S+", "", row["schedule"]))
        names.append(f"{label}  {orders}" if orders else label)
    seen = {n: names.count(n) for n in names}
    return [n if seen[n] == 1 else f"{n}  [{_short(r['schedule'], 36)}]" for n, r in zip(names, rows)]


def cycles_chart(group, path: str) -> str:
    plt = _pyplot()
    rows = sorted((r for r in group.rows if r.get("status") == "ok" and r.get("cycles") is not None),
                  key=lambda r: r["cycles"])
    failed = [r for r in group.rows if r.get("status") == "error"]
    labels = bar_labels(rows) + [n + " (failed)" for n in bar_labels(failed)]
    values = [r["cycles"] for r in rows] + [0 for _ in failed]
    height = max(2.5, 0.28 * len(labels) + 1.2)
    fig, ax = plt.subplots(figsize=(9, height))
    kinds = list(dict.fromkeys(r.get("label") or "" for r in rows))
    colors = [PALETTE[kinds.index(r.get("label") or "") % len(PALETTE)] for r in rows] + ["#c0392b"] * len(failed)
    bars = ax.barh(range(len(values)), values, color=colors)
    if len(kinds) > 1:  # one colour per granularity
        from matplotlib.patches import Patch  # noqa: PLC0415 - matplotlib is slow to import; only plots need it

        ax.legend([Patch(color=PALETTE[k % len(PALETTE)]) for k in range(len(kinds))], kinds, fontsize=7,
                  loc="upper left", bbox_to_anchor=(1.0, 1.0), title="granularity", title_fontsize=7)
    ax.bar_label(bars, [f"{v:,}" if v else "failed" for v in values], padding=3, fontsize=7)
    ax.set_yticks(range(len(values)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.margins(x=0.12)  # room for the value labels
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


def _ratio_axis(ax, values: list[float]) -> None:
    """Log scale when the ratios span more than 20x, so small and large bars both show."""
    positive = [v for v in values if v and v > 0 and math.isfinite(v)]
    if positive and max(positive) / min(positive) > 20:
        ax.set_yscale("log")
    ax.axhline(1.0, color="grey", linewidth=0.8, zorder=0)


def study_figure(rows: list[dict]):
    """A fusion study (`study.fusion_study` rows) in two panels: speedup over the first schedule
    (higher is better; slowdowns red) and FLOPs and memory relative to it (lower is better). Bars
    carry their values; estimated rows (not simulated) are hatched and marked `~`, failed ones
    say so."""
    plt = _pyplot()
    names = [r["schedule"] if len(r["schedule"]) <= 18 else r["schedule"][:17] + "…" for r in rows]
    first = rows[0]["schedule"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1, 1.6]})
    x = list(range(len(rows)))

    def bars(ax, offsets, key, width, color, label=None):
        values = [r.get(key) for r in rows]
        heights = [v if v is not None and math.isfinite(v) else 0.0 for v in values]
        drawn = ax.bar([i + offsets for i in x], heights, width, color=color, label=label,
                       hatch=None, edgecolor="white")
        for bar, row in zip(drawn, rows):
            if row.get("skipped"):
                bar.set_hatch("///")
                bar.set_alpha(0.6)
        texts = [("failed" if r.get("error") else "-") if v is None else
                 ("~" if r.get("skipped") else "") + f"{v:.2f}x" for r, v in zip(rows, values)]
        ax.bar_label(drawn, texts, padding=2, fontsize=8)
        return heights

    speedups = bars(left, 0.0, "speedup", 0.6, "#4e79a7")
    for bar, value in zip(left.patches, speedups):
        if 0 < value < 1:  # a slowdown
            bar.set_facecolor("#e15759")
    left.set_title(f"speedup over {first} (higher is better)", fontsize=10)
    _ratio_axis(left, speedups)
    left.set_xticks(x, names, fontsize=9)
    ratios = bars(right, -0.2, "flops_ratio", 0.38, "#f28e2b", "FLOPs")
    ratios += bars(right, 0.2, "mem_ratio", 0.38, "#59a14f", "memory traffic")
    right.set_title(f"FLOPs and memory relative to {first} (lower is better)", fontsize=10)
    _ratio_axis(right, ratios)
    right.set_xticks(x, names, fontsize=9)
    right.legend(fontsize=8, loc="upper left")
    for ax in (left, right):
        ax.margins(y=0.15)
        ax.spines[["top", "right"]].set_visible(False)
    title = f"{rows[0].get('model', '')} on {rows[0].get('dataset', '')}"
    if any(r.get("skipped") for r in rows):
        title += "   (~ hatched: heuristic estimate, not simulated)"
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def study_chart(rows: list[dict], path: str) -> str:
    """`study_figure` saved to `path` (PNG, SVG or PDF by the suffix)."""
    fig = study_figure(rows)
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
    return path


FIGURE_COLORS = {"unfused": "#bab0ac", "partial": "#4e79a7", "full": "#f28e2b"}
FIGURE_NAMES = {"unfused": "unfused", "partial": "partially fused", "full": "fully fused"}


def figure12(rows: list[dict], published: dict | None = None, labels: dict | None = None, title: str = ""):
    """The reference's Figure-12 layout from a suite's study rows (`suite.run.study_rows`): one
    panel per model, a group of bars per dataset (or block size), one bar per schedule: speedup
    over unfused on a log axis, every bar labelled with its value. Sampled rows carry their 95%
    interval as an error bar (labelled `s`), rows left to the heuristic are hatched and labelled
    `~`, failed ones `n/a`; `published` ({(model, dataset,
    block): {schedule: cycles}}) adds the published speedups as black marks."""
    plt = _pyplot()
    models = list(dict.fromkeys(r["model"] for r in rows))
    cases = {m: list(dict.fromkeys((r["dataset"], r.get("block")) for r in rows if r["model"] == m)) for m in models}
    schedules = sorted(dict.fromkeys(r["schedule"] for r in rows),
                       key=lambda s: list(FIGURE_NAMES).index(s) if s in FIGURE_NAMES else len(FIGURE_NAMES))
    fig, axes = plt.subplots(1, len(models), figsize=(max(8.0, 0.95 * sum(map(len, cases.values())) + 2), 5.6),
                             sharey=True, gridspec_kw={"width_ratios": [max(1, len(cases[m])) for m in models]},
                             squeeze=False)
    width = 0.8 / max(1, len(schedules))
    by_key = {(r["model"], r["dataset"], r.get("block"), r["schedule"]): r for r in rows}
    values = []
    for ax, model in zip(axes[0], models):
        for s, schedule in enumerate(schedules):
            xs = [c + (s - (len(schedules) - 1) / 2) * width for c in range(len(cases[model]))]
            found = [by_key.get((model, d, b, schedule)) for d, b in cases[model]]
            heights = [r["speedup"] if r and r.get("speedup") and math.isfinite(r["speedup"]) else 0.0 for r in found]
            values += [h for h in heights if h > 0]
            bars = ax.bar(xs, [h or float("nan") for h in heights], width, label=FIGURE_NAMES.get(schedule, schedule),
                          color=FIGURE_COLORS.get(schedule, PALETTE[s % len(PALETTE)]), edgecolor="white")
            for bar, row, x in zip(bars, found, xs):
                estimated = bool(row and (row.get("skipped") or row.get("estimated_ratios")))
                if estimated:
                    bar.set_hatch("///")
                text = "n/a" if not row or not row.get("speedup") else ("~" if estimated else "") + \
                    (f"{row['speedup']:.2f}" if row["speedup"] < 10 else f"{row['speedup']:.1f}") + \
                    ("s" if row.get("speedup_low") is not None else "")
                if row and row.get("speedup") and row.get("speedup_low") is not None:  # a sampled row's interval
                    ax.errorbar([x], [row["speedup"]], yerr=[[row["speedup"] - row["speedup_low"]],
                                                             [row["speedup_high"] - row["speedup"]]],
                                color="black", linewidth=0.9, capsize=2, zorder=4)
                ax.annotate(text, (x, bar.get_height() if row and row.get("speedup") else 1.0), xytext=(0, 2),
                            textcoords="offset points", ha="center", va="bottom", fontsize=6.5, rotation=90)
            for (d, b), x in zip(cases[model], xs):
                cycles = (published or {}).get((model, d, b), {})
                if cycles.get(schedule) and cycles.get("unfused"):
                    values.append(cycles["unfused"] / cycles[schedule])
                    ax.plot([x], [cycles["unfused"] / cycles[schedule]], marker="D", color="black", markersize=3.5,
                            linestyle="none", label="published" if s == 0 else None, zorder=3)
        names = [(labels or {}).get((model, d), d) if b is None else f"b{b}" for d, b in cases[model]]
        ax.set_xticks(range(len(names)), names, fontsize=8, rotation=30 if len(names) > 3 else 0)
        ax.set_title((labels or {}).get((model, None), model), fontsize=10)
        ax.axhline(1.0, color="grey", linewidth=0.8, zorder=0)
        ax.spines[["top", "right"]].set_visible(False)
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: PLC0415 - slow to import

    axes[0][0].set_yscale("log")
    axes[0][0].yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axes[0][0].yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axes[0][0].yaxis.set_minor_formatter(NullFormatter())
    if values:
        axes[0][0].set_ylim(min(values + [1.0]) / 2.5, max(values + [1.0]) * 4)
    axes[0][0].set_ylabel("speedup over unfused (log)")
    handles, names = axes[0][0].get_legend_handles_labels()
    seen = dict(sorted(zip(names, handles), key=lambda nh: nh[0] == "published"))  # published last
    fig.legend(list(seen.values()), list(seen), loc="upper center", ncol=len(seen), fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=9, y=0.02, va="bottom")
    fig.tight_layout(rect=(0, 0.05 if title else 0, 1, 0.93))
    return fig


def figure12_chart(rows: list[dict], path: str, **kw) -> str:
    """`figure12` saved to `path` (PNG, SVG or PDF by the suffix)."""
    fig = figure12(rows, **kw)
    fig.savefig(path, dpi=140)
    _pyplot().close(fig)
    return path
