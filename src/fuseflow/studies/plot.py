"""Charts of sweeps and studies (matplotlib, Agg backend: no display needed).

- `cycles-<n>.png` (or .svg, .pdf): simulated cycles per schedule, one bar chart per (program, data point, seed),
  bars sorted by cycles and labelled with the granularity they came from (`label`: a preset such
  as unfused/partial/full, or randomN) and their dataflow orders, each with its value; failed
  schedules marked, pruned ones left out;
- `heuristic-vs-simulated.png`: estimated vs simulated cycles of every simulated row (log-log),
  one colour per group, with each group's Spearman correlation in the legend;
- `study_chart`: a fusion study: speedup (higher is better) on its own axis, FLOPs and memory
  relative to the first schedule (lower is better) on another, every bar labelled.

    >>> bar_labels([ResultRow("full layout=induced order=i,k,j", label="full"),
    ...             ResultRow("full layout=induced order=k,i,j", label="full"),
    ...             ResultRow("fusion=[t1][t2] layout=induced order.1=j,i", label="unfused")])
    ['full  i,k,j', 'full  k,i,j', 'unfused  1:j,i']
"""
from __future__ import annotations

import math
import os
import re
import textwrap

from .analysis import groups
from .row import ResultRow

COLUMN_IN = 8.5 / 2.54  # a paper's column, inches: study charts and Figure 12 are drawn at the size they print
FONT = 7  # points, their smallest text (at that size)
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7"]


def _pyplot():
    import matplotlib  # noqa: PLC0415 - matplotlib is slow to import; only plots need it

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # noqa: PLC0415 - matplotlib is slow to import; only plots need it

    return plt


def _short(schedule: str, width: int = 48) -> str:
    text = re.sub(r"\s*layout=induced", " +ind", schedule)
    return text if len(text) <= width else text[:width - 1] + "…"


def bar_labels(rows: list[ResultRow]) -> list[str]:
    """Bar names: the row's granularity label (else its schedule, shortened) and its dataflow
    orders (`1:j,i` is group 1's); a name two rows share gets the schedule added."""
    names = []
    for row in rows:
        found = re.findall(r"order(?:\.(\d+))?=(\S+)", row.schedule)
        orders = " ".join((f"{g}:" if g else "") + o for g, o in found)
        label = row.label or _short(re.sub(r"\s*order(\.\d+)?=\S+", "", row.schedule))
        names.append(f"{label}  {orders}" if orders else label)
    seen = {n: names.count(n) for n in names}
    return [n if seen[n] == 1 else f"{n}  [{_short(r.schedule, 36)}]" for n, r in zip(names, rows)]


def cycles_chart(group, path: str) -> str:
    plt = _pyplot()
    rows = sorted((r for r in group.rows if r.status == "ok" and r.cycles is not None), key=lambda r: r.cycles)
    failed = [r for r in group.rows if r.status == "error"]
    labels = bar_labels(rows) + [n + " (failed)" for n in bar_labels(failed)]
    values = [r.cycles for r in rows] + [0 for _ in failed]
    height = max(2.5, 0.28 * len(labels) + 1.2)
    fig, ax = plt.subplots(figsize=(9, height))
    kinds = list(dict.fromkeys(r.label or "" for r in rows))
    colors = [PALETTE[kinds.index(r.label or "") % len(PALETTE)] for r in rows] + ["#c0392b"] * len(failed)
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
        ax.scatter([r.est_cycles for r in sim], [r.cycles for r in sim], s=14, label=label[:50])
    lo_hi = [v for g in all_groups for r in g.simulated for v in (r.est_cycles, r.cycles) if v > 0]
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


def draw(rows: list[ResultRow], out_dir: str, max_bar_charts: int = 40, fmt: str = "png") -> list[str]:
    """Write the standard charts for `rows` into `out_dir` as `fmt` files (png, svg, pdf);
    returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    all_groups = groups(rows)
    paths = []
    for n, g in enumerate(all_groups[:max_bar_charts]):
        if any(r.status in ("ok", "error") for r in g.rows):
            paths.append(cycles_chart(g, os.path.join(out_dir, f"cycles-{n}.{fmt}")))
    if any(g.simulated for g in all_groups):
        paths.append(scatter_chart(all_groups, os.path.join(out_dir, f"heuristic-vs-simulated.{fmt}")))
    return paths


def _ratio_axis(ax, values: list[float]) -> None:
    """Log scale when the ratios span more than 20x, so small and large bars both show."""
    positive = [v for v in values if v and v > 0 and math.isfinite(v)]
    if positive and max(positive) / min(positive) > 20:
        ax.set_yscale("log")
    ax.axhline(1.0, color="grey", linewidth=0.8, zorder=0)


def study_figure(rows: list[ResultRow], width: float = COLUMN_IN):
    """A fusion study (`study.fusion_study` rows), drawn `width` inches wide (a paper's column)
    at its printed size, in two panels, one above the other: speedup over the first schedule
    (higher is better; slowdowns red) and FLOPs and memory relative to it (lower is better). Bars
    carry their values, level; estimated rows (not simulated) are hatched and marked `~`, failed
    ones say so."""
    plt = _pyplot()
    names = [r.schedule if len(r.schedule) <= 14 else r.schedule[:13] + "…" for r in rows]
    first = rows[0].schedule
    fig, (left, right) = plt.subplots(2, 1, figsize=(width, 4.6))
    x = list(range(len(rows)))

    def bars(ax, offsets, key, bar_width, color, label=None):
        values = [getattr(r, key) for r in rows]
        heights = [v if v is not None and math.isfinite(v) else 0.0 for v in values]
        drawn = ax.bar([i + offsets for i in x], heights, bar_width, color=color, label=label,
                       hatch=None, edgecolor="white")
        for bar, row in zip(drawn, rows):
            if row.reason:
                bar.set_hatch("///")
                bar.set_alpha(0.6)
        texts = [("failed" if r.error else "-") if v is None else
                 ("~" if r.reason else "") + f"{v:.2f}x" for r, v in zip(rows, values)]
        ax.bar_label(drawn, texts, padding=1.5, fontsize=FONT)
        return heights

    speedups = bars(left, 0.0, "speedup", 0.55, "#4e79a7")
    for bar, value in zip(left.patches, speedups):
        if 0 < value < 1:  # a slowdown
            bar.set_facecolor("#e15759")
    left.set_title(f"speedup over {first} (higher is better)", fontsize=FONT + 0.5)
    _ratio_axis(left, speedups)
    ratios = bars(right, -0.2, "flops_ratio", 0.38, "#f28e2b", "FLOPs")
    ratios += bars(right, 0.2, "mem_ratio", 0.38, "#2f6b2a", "memory traffic")  # darker: grayscale
    right.set_title(f"FLOPs and memory relative to {first} (lower is better)", fontsize=FONT + 0.5)
    _ratio_axis(right, ratios)
    right.legend(fontsize=FONT, loc="upper left", frameon=False)
    for ax in (left, right):
        ax.set_xticks(x, names, fontsize=FONT)
        ax.tick_params(labelsize=FONT, length=2)
        ax.margins(y=0.2)
        ax.spines[["top", "right"]].set_visible(False)
    title = f"{rows[0].model or ''} on {rows[0].dataset or ''}"
    if any(r.reason for r in rows):
        title += "\n(~ hatched: heuristic estimate, not simulated)"
    fig.suptitle(title, fontsize=FONT + 1)
    fig.tight_layout(h_pad=0.6)
    return fig


def study_chart(rows: list[ResultRow], path: str) -> str:
    """`study_figure` saved to `path` (PNG, SVG or PDF by the suffix)."""
    fig = study_figure(rows)
    fig.savefig(path, dpi=300)
    _pyplot().close(fig)
    return path


FIGURE_COLORS = {"partial": "#4e79a7", "full": "#f28e2b"}  # dark and light: told apart in grayscale too
FIGURE_NAMES = {"unfused": "unfused", "partial": "partially fused", "full": "fully fused"}
MARKS = "¹²³⁴⁵⁶⁷⁸⁹"


def _speedup_text(row: ResultRow | None) -> str:
    """A bar's value: `2.53`, `0.012`, `~0.31` for an estimate, `n/a` when there is none."""
    if not row or not row.speedup or not math.isfinite(row.speedup):
        return "n/a"
    value = row.speedup
    return ("~" if _estimated(row) else "") + (f"{value:.2g}" if value < 0.1 else f"{value:.2f}" if value < 10
                                               else f"{value:.1f}") + ("s" if _sampled(row) else "")


def _estimated(row: ResultRow | None) -> bool:
    return bool(row and (row.reason or row.estimated_ratios))


def _sampled(row: ResultRow | None) -> bool:
    """Whether a row's speedup rests on a sampled row (it then has a 95% interval)."""
    return bool(row and row.speedup_low is not None)


def winner(speedups: dict) -> str | None:
    """The schedule with the highest speedup ({schedule: speedup or None}); None if none is known."""
    known = {k: v for k, v in speedups.items() if v}
    return max(known, key=known.get) if known else None


def figure12_marks(cases: dict, by_key: dict, published: dict, notes) -> tuple[dict, list[str]]:
    """Which cases carry a note mark, and the notes' lines: each of `notes` (with `models`,
    `datasets`, `text`; no datasets: all the models' cases) gets a number on the cases it covers; a case
    whose winner differs from the published one and has no note gets `*`."""
    marks: dict[tuple, str] = {}
    lines = []
    for note in notes:
        covered = [(m, d, b) for m in cases for d, b in cases[m]
                   if m in note.models and (not note.datasets or d in note.datasets)]
        if covered:
            mark = MARKS[len(lines) % len(MARKS)]
            lines.append(f"{mark} {note.text}")
            marks.update({c: marks.get(c, "") + mark for c in covered})
    differs = False
    for model in cases:
        for d, b in cases[model]:
            pub = (published or {}).get((model, d, b), {})
            ours = winner({s: getattr(by_key.get((model, d, b, s)), "speedup", None) for s in FIGURE_NAMES})
            theirs = winner({s: pub["unfused"] / v for s, v in pub.items() if v and pub.get("unfused")})
            if theirs and ours and ours != theirs and (model, d, b) not in marks:
                marks[(model, d, b)], differs = "*", True
    if differs:
        lines.append("* the winner differs from the published one")
    return marks, lines


def _label_at(value: float, published: float | None) -> float:
    """Where a bar's value label starts: past the bar's end, and past the published diamond
    when that lies on the same side of 1."""
    if published is None or (published >= 1) != (value >= 1):
        return value
    return max(value, published * 1.12) if value >= 1 else min(value, published / 1.12)


def _figure12_panel(ax, model: str, cases: list, by_key: dict, published: dict, names: list[str]) -> list[float]:
    """One model's horizontal bars: per case, partial and full fusion's speedup over unfused,
    drawn from 1 (unfused) so that a slowdown points left; the published speedup a black
    diamond. Returns the values drawn (for the axis' range)."""
    values = []
    for s, schedule in enumerate(("partial", "full")):
        for c, (d, b) in enumerate(cases):
            row, y = by_key.get((model, d, b, schedule)), c + (s - 0.5) * 0.4
            value = row.speedup if row and row.speedup and math.isfinite(row.speedup) else None
            if value is not None:
                values.append(value)
                bar = ax.barh(y, value - 1, left=1, height=0.38, color=FIGURE_COLORS[schedule], edgecolor="white",
                              linewidth=0.3, hatch="/////" if _estimated(row) else None,
                              label=FIGURE_NAMES[schedule] if c == 0 else None)[0]
                bar.set_edgecolor("white")
                if _sampled(row):  # a sampled row's 95% interval
                    ax.errorbar([value], [y], xerr=[[value - row.speedup_low], [row.speedup_high - value]],
                                color="black", linewidth=0.6, capsize=1.5, zorder=4)
            pub = (published or {}).get((model, d, b), {})
            theirs = pub["unfused"] / pub[schedule] if pub.get(schedule) and pub.get("unfused") else None
            if theirs is not None:
                values.append(theirs)
                ax.plot([theirs], [y], marker="D", color="black", markersize=2.6, linestyle="none",
                        label="published" if c == 0 and s == 0 else None, zorder=3)
            ax.annotate(_speedup_text(row), (_label_at(value or 1.0, theirs), y),
                        xytext=(3 if (value or 1) >= 1 else -3, 0), textcoords="offset points",
                        ha="left" if (value or 1) >= 1 else "right", va="center", fontsize=FONT - 0.5)
    ax.set_yticks(range(len(cases)), names, fontsize=FONT)
    ax.set_ylim(len(cases) - 0.45, -0.55)
    ax.axvline(1.0, color="#555555", linewidth=0.6, zorder=0)
    ax.tick_params(axis="both", labelsize=FONT, length=2, pad=1.5)
    ax.spines[["top", "right"]].set_visible(False)
    return values


def figure12(rows: list[ResultRow], published: dict | None = None, labels: dict | None = None, title: str = "",
             notes=(), width: float = COLUMN_IN):
    """The reference's Figure 12 from a suite's study rows (`suite.run.study_rows`), drawn
    `width` inches wide (a paper's column) at its printed size, every text at least 6.5 points:
    a panel per model, a pair of bars per dataset (or block size): partial and full fusion's
    speedup over unfused on a log axis, from 1 (unfused) so that slowdowns point left, each
    labelled with its value. Sampled rows carry their 95% interval as an error bar and `s`;
    rows left to the heuristic are hatched and `~`; `published` ({(model, dataset,
    block): {schedule: cycles}}) adds the published speedups as black diamonds; `notes`
    (`spec.ChartNote`) are numbered on the cases they explain and written below."""
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: PLC0415 - slow to import

    models = list(dict.fromkeys(r.model for r in rows))
    cases = {m: list(dict.fromkeys((r.dataset, r.block) for r in rows if r.model == m)) for m in models}
    by_key = {(r.model, r.dataset, r.block, r.schedule): r for r in rows}
    marks, note_lines = figure12_marks(cases, by_key, published or {}, notes)
    if any(_sampled(r) for r in rows):
        note_lines.append("s: sampled (windows of the kernels' outer loops); its error bar: the 95% interval")
    wrapped = [textwrap.fill(line, int(width * 72 / (FONT * 0.53)), subsequent_indent="  ") for line in note_lines]
    note_in = sum(text.count("\n") + 1 for text in wrapped) * FONT * 1.25 / 72
    panels_in = sum(0.22 * len(cases[m]) + 0.2 for m in models)
    height = panels_in + 0.75 + note_in
    fig, axes = plt.subplots(len(models), 1, figsize=(width, height), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": [len(cases[m]) for m in models]})
    values = []
    for ax, model in zip(axes[:, 0], models):
        names = [((labels or {}).get((model, d), d) if b is None else f"block {b}") + marks.get((model, d, b), "")
                 for d, b in cases[model]]
        values += _figure12_panel(ax, model, cases[model], by_key, published or {}, names)
        ax.set_title((labels or {}).get((model, None), model), fontsize=FONT + 1, loc="left", pad=2,
                     fontweight="bold")
    bottom = axes[-1][0]
    bottom.set_xscale("log")
    low, high = min(values + [1.0]) / 6, max(values + [1.0]) * 3  # room for the value labels
    bottom.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if high / low < 1e3 else (1.0,)))
    bottom.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    bottom.xaxis.set_minor_formatter(NullFormatter())
    bottom.set_xlim(low, high)
    bottom.set_xlabel("speedup over unfused (log scale; 1 = unfused)", fontsize=FONT)
    from matplotlib.patches import Patch  # noqa: PLC0415 - slow to import

    found = {n: h for ax in axes[:, 0] for h, n in zip(*ax.get_legend_handles_labels())}
    names = [FIGURE_NAMES[s] for s in FIGURE_COLORS] + (["published"] if "published" in found else [])
    handles = [Patch(facecolor=FIGURE_COLORS[s]) for s in FIGURE_COLORS] + [found[n] for n in names[2:]]
    handles.append(Patch(facecolor="#bbbbbb", hatch="/////", edgecolor="white"))
    names.append("~ heuristic")
    fig.legend(handles, names, loc="upper center", ncol=len(names), fontsize=FONT, frameon=False,
               handlelength=1.2, columnspacing=0.8, handletextpad=0.4, bbox_to_anchor=(0.5, 1.0))
    if title:
        note_lines.insert(0, title)
        wrapped.insert(0, textwrap.fill(title, int(width * 72 / (FONT * 0.53))))
        note_in += (wrapped[0].count("\n") + 1) * FONT * 1.25 / 72
    if wrapped:
        fig.text(0.01, 0.005, "\n".join(wrapped), fontsize=FONT, va="bottom", ha="left", linespacing=1.25)
    fig.tight_layout(rect=(0, (note_in + 0.05) / height, 1, 1 - 0.18 / height), h_pad=0.4)
    return fig


def _saved(fig, path: str) -> str:
    """`fig` saved to `path` (PNG at 300 dpi, SVG or PDF by the suffix) and closed."""
    fig.savefig(path, dpi=300)
    _pyplot().close(fig)
    return path


def figure12_chart(rows: list[ResultRow], path: str, **kw) -> str:
    """`figure12` saved to `path` (PNG at 300 dpi, SVG or PDF by the suffix)."""
    return _saved(figure12(rows, **kw), path)


COUNT_MARKERS = "osDv^<>p"  # a configuration's marker, in the order the published counts list them


def _count_point(row: ResultRow | None) -> tuple[float, float] | None:
    """A row's (memory accesses, FLOPs) over its baseline's, where both are known."""
    if not row or row.error:
        return None
    x, y = row.mem_ratio, row.flops_ratio
    ok = all(v is not None and math.isfinite(v) and v > 0 for v in (x, y))
    return (x, y) if ok else None


def figure14(rows: list[ResultRow], counts: dict, labels: dict | None = None, schedule_labels: dict | None = None,
             width: float = 2 * COLUMN_IN):
    """The reference's Figure 14 from a suite's study rows: a panel per case of `counts`
    ({(model, dataset): {schedule: (FLOPs, memory accesses)}}, the baseline first), each
    configuration's FLOPs against its memory accesses over the baseline's, log-log: ours filled,
    the published hollow (a thin line joins the two), one colour and marker per configuration;
    `~` marks the heuristic's estimates, `s` a sampled row, and a panel lists what did not run.
    The dotted diagonal is the baseline's FLOPs per access."""
    plt = _pyplot()
    from matplotlib.lines import Line2D  # noqa: PLC0415 - matplotlib is slow to import
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: PLC0415 - slow to import

    by_key = {(r.model, r.dataset, r.schedule): r for r in rows if r.block is None}
    schedules = list(dict.fromkeys(s for published in counts.values() for s in published))
    style = {s: (PALETTE[k % len(PALETTE)], COUNT_MARKERS[k % len(COUNT_MARKERS)]) for k, s in enumerate(schedules)}
    fig, axes = plt.subplots(1, max(len(counts), 1), figsize=(width, 2.3), squeeze=False)
    for ax, ((model, dataset), published) in zip(axes[0], counts.items()):
        pub_flops, pub_mem = next(iter(published.values()))
        points, missing = [], []
        for schedule, (flops, mem) in published.items():
            color, marker = style[schedule]
            theirs = (mem / pub_mem, flops / pub_flops)
            row = by_key.get((model, dataset, schedule))
            ours = _count_point(row)
            ax.plot(*theirs, marker=marker, markersize=5, markerfacecolor="none", markeredgecolor=color,
                    linestyle="none", zorder=3)
            points.append(theirs)
            if ours is None:
                missing.append((schedule_labels or {}).get(schedule, schedule))
                continue
            points.append(ours)
            ax.plot(*zip(theirs, ours), color=color, linewidth=0.5, alpha=0.6, zorder=2)
            ax.plot(*ours, marker=marker, markersize=5, color=color, markeredgecolor="black", markeredgewidth=0.3,
                    linestyle="none", zorder=4)
            mark = ("~" if _estimated(row) else "") + ("s" if row.sampled else "")
            if mark:
                ax.annotate(mark, ours, xytext=(3, 3), textcoords="offset points", fontsize=FONT - 1)
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        low, high = min(xs + ys) / 1.6, max(xs + ys) * 1.6
        ax.plot([low, high], [low, high], linestyle=":", color="#999999", linewidth=0.6, zorder=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(min(xs) / 1.4, max(xs) * 1.4)
        ax.set_ylim(min(ys) / 1.4, max(ys) * 1.4)
        for axis, values in ((ax.xaxis, xs), (ax.yaxis, ys)):
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if max(values) / min(values) < 100
                                              else (1.0,)))
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())
        ax.tick_params(axis="both", labelsize=FONT, length=2, pad=1.5)
        ax.spines[["top", "right"]].set_visible(False)
        ax.set_title(f"{(labels or {}).get((model, None), model)} {(labels or {}).get((model, dataset), dataset)}",
                     fontsize=FONT + 1, loc="left", pad=2, fontweight="bold")
        below = textwrap.fill("not run: " + ", ".join(missing), int(width / len(counts) * 72 / (FONT * 0.5)))
        ax.set_xlabel("memory accesses / unfused" + ("\n" + below if missing else ""), fontsize=FONT)
    axes[0][0].set_ylabel("FLOPs / unfused", fontsize=FONT)
    handles = [Line2D([], [], marker=style[s][1], color=style[s][0], markeredgecolor="black", markeredgewidth=0.3,
                      linestyle="none") for s in schedules]
    names = [(schedule_labels or {}).get(s, s) for s in schedules]
    handles += [Line2D([], [], marker="o", color="black", linestyle="none", markersize=4),
                Line2D([], [], marker="o", markerfacecolor="none", markeredgecolor="black", linestyle="none",
                       markersize=4)]
    names += ["fuseflow", "published"]
    fig.legend(handles, names, loc="upper center", ncol=len(names), fontsize=FONT, frameon=False,
               handlelength=1.0, columnspacing=0.8, handletextpad=0.3, bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.25 / 2.3), w_pad=0.8)
    return fig


def figure14_chart(rows: list[ResultRow], path: str, **kw) -> str:
    """`figure14` saved to `path` (PNG at 300 dpi, SVG or PDF by the suffix)."""
    return _saved(figure14(rows, **kw), path)
