"""The results page of a suite, generated from its database: the table of our speedups beside
the published ones (winners compared), sampled rows with their intervals, rows left to the
heuristic marked with their reason, the Figure-12 chart (error bars on sampled rows) and the
suite's wall time. A page with the markers `<!-- suite NAME begin -->` and
`<!-- suite NAME end -->` keeps everything outside them (hand-written explanations).

    >>> rows = [{"model": "gcn", "dataset": "cora", "block": None, "schedule": s, "speedup": v,
    ...          "cycles": c, "flops_ratio": 1.0, "wall": 1.0}
    ...         for s, v, c in (("unfused", 1.0, 100), ("partial", 1.6, 62), ("full", 0.3, 333))]
    >>> published = {("gcn", "cora", None): {"unfused": 49, "partial": 30, "full": 166}}
    >>> line = table_lines(rows, published, {})[2]
    >>> line.split(" | ")[2:7]
    ['100', '1.60x', '0.30x', 'partial ✓', '1.63x / 0.30x']
"""
from __future__ import annotations

import datetime
import os

from ...files import atomic_path, write_text
from ..plot import figure12_chart, winner
from .run import suite_rows

HEAD = ["model", "dataset", "unfused cycles", "partial", "full", "winner", "published partial / full",
        "published winner", "full FLOPs / unfused", "wall (s)"]
TABLE_SCHEDULES = ("unfused", "partial", "full")  # the table's schedules; a case's variants are listed below it


def _cell(row: dict | None) -> str:
    if row is None:
        return "not run"
    if row.get("error"):
        return "failed"
    if row.get("speedup") is None:
        return "-"
    text = ("~" if row.get("estimated_ratios") else "") + f"{row['speedup']:.2f}x"
    if row.get("speedup_low") is not None:  # rests on a sampled row: its 95% interval
        text += f" ({row['speedup_low']:.2f}-{row['speedup_high']:.2f})" + ("ˢ" if row.get("mode") == "sampled" else "")
    return text


def _cases(rows: list[dict]) -> dict:
    cases: dict[tuple, dict] = {}
    for r in rows:
        cases.setdefault((r["model"], r["dataset"], r.get("block")), {})[r["schedule"]] = r
    return cases


def table_lines(rows: list[dict], published: dict, labels: dict) -> list[str]:
    """The Markdown table: one line per (model, dataset, block)."""
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    for (model, dataset, block), by in _cases(rows).items():
        base = by.get("unfused") or {}
        cycles = base.get("model_cycles") or base.get("cycles")
        unfused = f"{cycles:,}" + ("ˢ" if base.get("mode") == "sampled" else "") if cycles else \
            (f"~{base['est_cycles']:.3g}" if base.get("est_cycles") else "-")
        pub = published.get((model, dataset, block), {})
        pub_speed = {k: pub["unfused"] / v for k, v in pub.items() if v and pub.get("unfused")}
        ours = winner({k: (r.get("speedup") if not r.get("error") else None) for k, r in by.items()
                       if k in TABLE_SCHEDULES}) or "-"
        theirs = winner(pub_speed) or "-"
        full = by.get("full") or {}
        flops = full.get("flops_ratio")
        name = labels.get((model, dataset), dataset) + (f" b{block}" if block else "")
        wall = sum(r.get("wall") or 0.0 for k, r in by.items() if k in TABLE_SCHEDULES)
        lines.append("| " + " | ".join([
            labels.get((model, None), model), name, unfused, _cell(by.get("partial")), _cell(by.get("full")),
            ours + (" ✓" if theirs != "-" and ours == theirs else ""),
            " / ".join(f"{pub_speed[k]:.2f}x" if k in pub_speed else "-" for k in ("partial", "full")) if pub else "-",
            theirs, "-" if flops is None else ("~" if full.get("estimated_ratios") else "") + f"{flops:.1f}x",
            f"{wall:.0f}"]) + " |")
    return lines


def variant_lines(rows: list[dict], labels: dict) -> list[str]:
    """One line per row of a schedule the table has no column for (a case's `variants`): its
    speedup over unfused beside the case's `full`, its cycles and wall time.

        >>> rows = [{"model": "gcn", "dataset": "cora", "schedule": "full", "speedup": 0.3},
        ...         {"model": "gcn", "dataset": "cora", "schedule": "full order=reference", "speedup": 0.25,
        ...          "cycles": 400, "wall": 2.0}]
        >>> variant_lines(rows, {})
        ['- gcn cora `full order=reference`: 0.25x (full: 0.30x), 400 cycles, 2 s']
    """
    full = {(r["model"], r["dataset"], r.get("block")): r for r in rows if r["schedule"] == "full"}
    out = []
    for r in rows:
        if r["schedule"] in TABLE_SCHEDULES:
            continue
        key = (r["model"], r["dataset"], r.get("block"))
        what = f"{labels.get((r['model'], None), r['model'])} {labels.get(key[:2], r['dataset'])}" \
            + (f" b{r['block']}" if r.get("block") else "")
        cycles = r.get("model_cycles") or r.get("cycles")
        details = [f"full: {_cell(full.get(key))}"] if key in full else []
        out.append(f"- {what} `{r['schedule']}`: {_cell(r)}" + (f" ({', '.join(details)})" if details else "")
                   + (f", {cycles:,} cycles" if cycles and not r.get("skipped") else "")
                   + (f", {r['wall']:.0f} s" if r.get("wall") is not None else ""))
    return out


def notes(rows: list[dict], labels: dict) -> list[str]:
    """One line per row not simulated (estimated, with the reason) or failed (with the error)."""
    out = []
    for r in rows:
        what = f"{labels.get((r['model'], None), r['model'])} {labels.get((r['model'], r['dataset']), r['dataset'])}" \
            + (f" b{r['block']}" if r.get("block") else "") + f" {r['schedule']}"
        if r.get("skipped"):
            out.append(f"- `~` {what}: the heuristic's estimate (the last resort), not simulated: {r['skipped']}")
        elif r.get("mode") == "sampled":
            out.append(f"- ˢ {what}: sampled, {r['cycles']:,} cycles, 95% interval {r['cycles_low']:,} to "
                       f"{r['cycles_high']:,} (+-{(r['cycles_high'] - r['cycles_low']) / 2 / r['cycles']:.1%}), "
                       f"{r['sampled_fraction']:.1%} of windows simulated: {r.get('method') or ''}")
        elif r.get("error"):
            out.append(f"- {what}: failed: {r['error']}")
    return out


def _wall(sessions: list[dict]) -> str:
    seconds = sum(s["seconds"] for s in sessions)
    workers = sorted({s["workers"] for s in sessions if s["workers"]})
    return (f"{seconds / 60:.1f} minutes ({seconds:.0f} s) in {len(sessions)} session"
            f"{'s' if len(sessions) != 1 else ''} on {'/'.join(map(str, workers)) or '?'} worker"
            f"{'' if workers == [1] else 's'}")


def section(db, suite, figure: str | None, page: str | None) -> str:
    """The generated part of the page."""
    rows = in_figure_order(suite_rows(db, suite), suite.published)
    sessions = db.sessions(suite.name)
    simulated = sum(1 for r in rows if r["status"] == "ok")
    sampled = sum(1 for r in rows if r["status"] == "ok" and r.get("mode") == "sampled")
    estimated = sum(1 for r in rows if r["status"] == "estimated")
    failed = sum(1 for r in rows if r["status"] == "error")
    today = datetime.date.today().isoformat()
    text = [f"Generated from `{os.path.basename(db.path)}` by `fuseflow study suite {suite.name} --db "
            f"{os.path.basename(db.path)} --page ... --figure ...` on {today}: {len(rows)} of "
            f"{len(suite.tasks())} tasks, {simulated} simulated ({simulated - sampled} whole and verified, {sampled} "
            f"sampled, `ˢ`), {estimated} left to the heuristic (`~`), "
            f"{failed} failed. Suite wall time: {_wall(sessions)}." if sessions else "", ""]
    text += ["Speedup over unfused (higher is better); `ˢ` marks a sampled row (cycles estimated from a sample "
             "of its kernels' windows: the speedup's 95% interval in brackets, the sample below); `~` marks a "
             "ratio of the heuristic's estimates (a schedule, or its unfused baseline, not simulated: the last "
             "resort, the reason below); ✓ marks a winner that agrees with the published one.",
             ""] + table_lines(rows, suite.published, suite.labels) + [""]
    variants = variant_lines(rows, suite.labels)
    if variants:
        text += ["Variants beside the table's schedules (speedup over the same unfused row):", ""] + variants + [""]
    if figure:
        link = os.path.relpath(figure, os.path.dirname(os.path.abspath(page))) if page else figure
        text += [f"![Figure 12: speedup over unfused, log scale]({link})", ""]
    text += notes(rows, suite.labels)
    return "\n".join(text).strip() + "\n"


def in_figure_order(rows: list[dict], published: dict) -> list[dict]:
    """Rows ordered as the published entries list their cases (the paper's order), others after."""
    order = {key: n for n, key in enumerate(published)}
    models = {key[0]: n for n, key in reversed(list(enumerate(published)))}
    return sorted(rows, key=lambda r: (models.get(r["model"], len(order)),
                                       order.get((r["model"], r["dataset"], r.get("block")), len(order))))


def draw_figure(rows: list[dict], suite, path: str, labels: dict | None = None) -> str:
    """The Figure-12 chart of a suite's study rows, written atomically to `path` (`labels`: the
    datasets' names, else the suite's)."""
    with atomic_path(path, "--figure") as temp:
        figure12_chart(in_figure_order(rows, suite.published), temp, published=suite.published, labels=labels or
                       suite.labels, notes=suite.notes)
    return path


def write_page(db, suite, page: str | None = None, figure: str | None = None) -> list[str]:
    """Write the figure and the page (or the page's generated part, between its markers);
    returns the paths written."""
    written = []
    if figure:
        draw_figure(suite_rows(db, suite), suite, figure)
        written.append(figure)
    if page:
        begin, end = f"<!-- suite {suite.name} begin -->", f"<!-- suite {suite.name} end -->"
        body = f"{begin}\n{section(db, suite, figure, page)}{end}\n"
        old = open(page, encoding="utf-8").read() if os.path.isfile(page) else ""
        if begin in old and end in old:
            head, rest = old.split(begin, 1)
            text = head + body + rest.split(end, 1)[1].lstrip("\n")
        else:
            text = f"# Suite {suite.name}: results\n\n{suite.description}\n\n{body}"
        write_text(page, text, "--page")
        written.append(page)
    return written
