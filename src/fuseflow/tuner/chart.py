"""The chart of a tune (`fuseflow tune ... --plot OUT.png`): two panels, cycles against bytes
moved and cycles against the largest FIFO, each with every simulated schedule (grey), its
Pareto front (a step line), the presets (named) and the answer (a star); an axis spanning more
than `LOG_FROM` times is logarithmic. A sampled point has
its 95% interval drawn as a vertical bar.

    >>> from fuseflow.tuner.result import Point, TuneResult, front
    >>> pts = [Point("a", 90, 400, 30), Point("full", 100, 300, 8, preset="full"), Point("c", 110, 500, 4)]
    >>> r = TuneResult("p", "a", 90, True, 400, 30, "cycles", 1, [], {}, 1.0, points=pts,
    ...                pareto=front(pts, "traffic_bytes"), pareto_buffering=front(pts, "max_fifo"))
    >>> import os, tempfile
    >>> path = front_chart(r, os.path.join(tempfile.mkdtemp(), "tune.png"))
    >>> open(path, "rb").read(4) == b"\\x89PNG"
    True
"""
from __future__ import annotations

import os

from ..errors import UserError
from .result import AXES, TuneResult

PRESET_COLOURS = ["#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#e15759"]
FRONT_COLOUR = "#4e79a7"
LOG_FROM = 20  # an axis whose values span more than this factor is drawn in log scale


def front_chart(result: TuneResult, path: str) -> str:
    """Draw `result`'s two fronts into `path` (PNG, or any format matplotlib names by the
    extension); returns `path`. A folder that does not exist is one line of error."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"cannot write the chart to {path}: no folder {folder}", "--plot")
    import matplotlib  # noqa: PLC0415 - matplotlib is slow to import; only the chart needs it

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    fronts = {"traffic_bytes": result.pareto, "max_fifo": result.pareto_buffering}
    presets = sorted({p.preset for p in result.points if p.preset})
    for ax, (key, label) in zip(axes, AXES.items()):
        xs = [getattr(p, key) for p in result.points]
        ax.scatter(xs, [p.cycles for p in result.points], s=8, color="#bbbbbb", label="simulated", zorder=1)
        for p in result.points:
            if p.cycles_low is not None:
                ax.plot([getattr(p, key)] * 2, [p.cycles_low, p.cycles_high], color="#bbbbbb", lw=0.8, zorder=1)
        line = sorted(fronts[key], key=lambda p: getattr(p, key))
        ax.step([getattr(p, key) for p in line], [p.cycles for p in line], where="post", color=FRONT_COLOUR,
                marker="o", ms=4, label="Pareto front", zorder=2)
        for colour, name in zip(PRESET_COLOURS * 4, presets):
            at = [p for p in result.points if p.preset == name][:1]
            ax.scatter([getattr(p, key) for p in at], [p.cycles for p in at], s=40, marker="s", color=colour,
                       edgecolor="black", lw=0.5, label=f"preset {name}", zorder=3)
        best = [p for p in result.points if p.schedule == result.schedule][:1]
        ax.scatter([getattr(p, key) for p in best], [result.cycles] * len(best), s=140, marker="*",
                   color="#e15759", edgecolor="black", lw=0.5, label="tuned", zorder=4)
        for values, scale in ((xs, ax.set_xscale), ([p.cycles for p in result.points], ax.set_yscale)):
            positive = [v for v in values if v and v > 0]
            if positive and max(positive) > LOG_FROM * min(positive):
                scale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("cycles")
        ax.set_title(f"cycles against {label}", fontsize=9)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=min(len(labels), 5), frameon=False)
    fig.suptitle(f"fuseflow tune: {result.program} ({len(result.points)} schedules simulated)", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
