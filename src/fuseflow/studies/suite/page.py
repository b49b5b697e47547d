"""The results page of a suite, generated from its database: the table of our speedups beside
the published ones (winners compared), sampled rows with their intervals, rows left to the
heuristic marked with their reason, the Figure-12 chart (error bars on sampled rows) and the
suite's wall time; where the suite has `[[published_counts]]`, a Figure-14 section: per case,
each schedule's FLOPs and memory accesses over the baseline's beside the published ones, and
its chart. A page with the markers `<!-- suite NAME begin -->` and `<!-- suite NAME end -->`
(and `<!-- suite NAME figure14 begin -->`, `... end -->`) keeps everything outside them
(hand-written explanations).

    >>> rows = [ResultRow(s, model="gcn", dataset="cora", speedup=v, cycles=c, flops_ratio=1.0, wall_seconds=1.0)
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
from ..plot import figure12_chart, figure14_chart, winner
from ..row import ResultRow
from .run import suite_rows
from .tuned import tuned_lines, tuned_rows

HEAD = ["model", "dataset", "unfused cycles", "partial", "full", "winner", "published partial / full",
        "published winner", "full FLOPs / unfused", "wall (s)"]
TABLE_SCHEDULES = ("unfused", "partial", "full")  # the table's schedules; a case's variants are listed below it


def _cell(row: ResultRow | None) -> str:
    if row is None:
        return "not run"
    if row.error:
        return "failed"
    if row.speedup is None:
        return "-"
    text = ("~" if row.estimated_ratios else "") + f"{row.speedup:.2f}x"
    if row.speedup_low is not None:  # rests on a sampled row: its 95% interval
        text += f" ({row.speedup_low:.2f}-{row.speedup_high:.2f})" + ("ˢ" if row.sampled else "")
    return text


def _cases(rows: list[ResultRow]) -> dict:
    cases: dict[tuple, dict] = {}
    for r in rows:
        cases.setdefault((r.model, r.dataset, r.block), {})[r.schedule] = r
    return cases


NONE = ResultRow("")  # a case's missing row: no values


def table_lines(rows: list[ResultRow], published: dict, labels: dict) -> list[str]:
    """The Markdown table: one line per (model, dataset, block)."""
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    for (model, dataset, block), by in _cases(rows).items():
        base = by.get("unfused") or NONE
        cycles = base.best_cycles
        unfused = f"{cycles:,}" + ("ˢ" if base.sampled else "") if cycles else \
            (f"~{base.est_cycles:.3g}" if base.est_cycles else "-")
        pub = published.get((model, dataset, block), {})
        pub_speed = {k: pub["unfused"] / v for k, v in pub.items() if v and pub.get("unfused")}
        ours = winner({k: (r.speedup if not r.error else None) for k, r in by.items()
                       if k in TABLE_SCHEDULES}) or "-"
        theirs = winner(pub_speed) or "-"
        full = by.get("full") or NONE
        flops = full.flops_ratio
        name = labels.get((model, dataset), dataset) + (f" b{block}" if block else "")
        wall = sum(r.wall_seconds or 0.0 for k, r in by.items() if k in TABLE_SCHEDULES)
        lines.append("| " + " | ".join([
            labels.get((model, None), model), name, unfused, _cell(by.get("partial")), _cell(by.get("full")),
            ours + (" ✓" if theirs != "-" and ours == theirs else ""),
            " / ".join(f"{pub_speed[k]:.2f}x" if k in pub_speed else "-" for k in ("partial", "full")) if pub else "-",
            theirs, "-" if flops is None else ("~" if full.estimated_ratios else "") + f"{flops:.1f}x",
            f"{wall:.0f}"]) + " |")
    return lines


def variant_lines(rows: list[ResultRow], labels: dict, schedule_labels: dict | None = None) -> list[str]:
    """One line per row of a schedule the table has no column for (a case's `variants`, named by
    their label where `schedule_labels` has one): its speedup over unfused beside the case's
    `full`, its cycles and wall time.

        >>> rows = [ResultRow("full", model="gcn", dataset="cora", speedup=0.3),
        ...         ResultRow("full order=reference", model="gcn", dataset="cora", speedup=0.25, cycles=400,
        ...                   wall_seconds=2.0)]
        >>> variant_lines(rows, {})
        ['- gcn cora `full order=reference`: 0.25x (full: 0.30x), 400 cycles, 2 s']
        >>> variant_lines(rows, {}, {"full order=reference": "as the reference"})[0][:46]
        '- gcn cora as the reference (`full order=refer'
    """
    full = {(r.model, r.dataset, r.block): r for r in rows if r.schedule == "full"}
    out = []
    for r in rows:
        if r.schedule in TABLE_SCHEDULES:
            continue
        key = (r.model, r.dataset, r.block)
        what = f"{labels.get((r.model, None), r.model)} {labels.get(key[:2], r.dataset)}" \
            + (f" b{r.block}" if r.block else "")
        cycles = r.best_cycles
        details = [f"full: {_cell(full.get(key))}"] if key in full else []
        label = (schedule_labels or {}).get(r.schedule)
        name = f"{label} (`{r.schedule}`)" if label else f"`{r.schedule}`"
        out.append(f"- {what} {name}: {_cell(r)}" + (f" ({', '.join(details)})" if details else "")
                   + (f", {cycles:,} cycles" if cycles and not r.reason else "")
                   + (f", {r.wall_seconds:.0f} s" if r.wall_seconds is not None else ""))
    return out


def notes(rows: list[ResultRow], labels: dict) -> list[str]:
    """One line per row not simulated (estimated, with the reason) or failed (with the error)."""
    out = []
    for r in rows:
        what = f"{labels.get((r.model, None), r.model)} {labels.get((r.model, r.dataset), r.dataset)}" \
            + (f" b{r.block}" if r.block else "") + f" {r.schedule}"
        if r.reason:
            out.append(f"- `~` {what}: the heuristic's estimate (the last resort), not simulated: {r.reason}")
        elif r.sampled:
            out.append(f"- ˢ {what}: sampled, {r.cycles:,} cycles, 95% interval {r.cycles_low:,} to "
                       f"{r.cycles_high:,} (+-{(r.cycles_high - r.cycles_low) / 2 / r.cycles:.1%}), "
                       f"{r.sampled_fraction:.1%} of windows simulated: {r.method or ''}")
        elif r.error:
            out.append(f"- {what}: failed: {r.error}")
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
    simulated = sum(1 for r in rows if r.status == "ok")
    sampled = sum(1 for r in rows if r.status == "ok" and r.sampled)
    estimated = sum(1 for r in rows if r.status == "estimated")
    failed = sum(1 for r in rows if r.status == "error")
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
    order = list(dict.fromkeys((r.model, r.dataset, r.block) for r in rows))
    tuned = tuned_lines(tuned_rows(db, suite), suite.labels, order)
    if tuned:
        text += tuned + [""]
    variants = variant_lines(rows, suite.labels, suite.schedule_labels)
    if variants:
        text += ["Variants beside the table's schedules (speedup over the same unfused row):", ""] + variants + [""]
    if figure:
        link = os.path.relpath(figure, os.path.dirname(os.path.abspath(page))) if page else figure
        text += [f"![Figure 12: speedup over unfused, log scale]({link})", ""]
    text += notes(rows, suite.labels)
    return "\n".join(text).strip() + "\n"


# -- Figure 14: FLOPs and memory accesses over the baseline ------------------------------------------
COUNTS_HEAD = ["configuration", "FLOPs / unfused", "published", "memory accesses / unfused", "published", "run"]
COUNTING = ("FLOPs are the simulator's ALU results plus its reducers' and accumulators' accumulations (the "
            "reference: `Op count` + `Reduce count`). Memory accesses are `mem_reads + mem_writes`: reads of "
            "compressed levels (two segment reads per fiber looked up, one coordinate read per coordinate) and "
            "of value arrays, writes of compressed levels (a coordinate per entry, a segment entry per fiber) "
            "and of values (one per value token, empty ones included); the reference sums its scanners' "
            "`Crd read count`, its compressed writers' `Crd write count` (coordinates and segments), its "
            "arrays' `Num reads` and its value writers' `Write count` (values only, empty tokens not counted). "
            "Its reader's count was not checked for segment reads.")


def _sampled_pair(row: ResultRow, base: ResultRow | None) -> bool:
    return row.sampled or (base is not None and base.sampled)


def _count_ratio(row: ResultRow | None, base: ResultRow | None, key: str) -> str:
    """A row's FLOPs or memory accesses (`key`: flops_ratio, mem_ratio) over the baseline's:
    `~` where they are the heuristic's estimates, `ˢ` where either rests on a sample."""
    if row is None:
        return "not run"
    if row.error:
        return "failed"
    value = getattr(row, key)
    if value is None or value != value:  # no ratio (the baseline has not run, or failed)
        return "-"
    return ("~" if row.estimated_ratios else "") + f"{value:.2f}x" + ("ˢ" if _sampled_pair(row, base) else "")


def _how_it_ran(row: ResultRow | None) -> str:
    """How a row's counts came about: whole (verified or not), sampled (the windows simulated and
    the cycles' 95% interval: the counts themselves carry none), the heuristic's, failed, not run."""
    if row is None:
        return "not run"
    if row.error:
        return "failed"
    if row.reason:
        return "heuristic estimate (`~`)"
    if row.sampled:
        spread = (row.cycles_high - row.cycles_low) / 2 / row.cycles if row.cycles else None
        return (f"sampled (`ˢ`): {row.sampled_fraction or 0:.1%} of windows" +
                (f", cycles +-{spread:.1%} (95%)" if spread is not None else "") + ", counts scaled from the sample")
    return "whole, " + ("verified" if row.verified else "not verified")


def _absolute(row: ResultRow | None, key: str) -> tuple[str, float | None]:
    """A baseline row's count (`flops` or `mem`) as text and value; `~` where it is the heuristic's."""
    if row is None or row.error:
        return "not run" if row is None else "failed", None
    if row.reason:
        value = getattr(row, "est_" + key)
        return (f"~{value:,.0f}", value) if value else ("-", None)
    value = getattr(row, key)
    return (f"{value:,}" + ("ˢ" if row.sampled else ""), value) if value is not None else ("-", None)


def counts_lines(rows: list[ResultRow], suite) -> list[str]:
    """The Figure-14 tables: per case of `suite.published_counts`, each schedule's FLOPs and memory
    accesses over the baseline's, ours beside the published, how each row ran, and the baseline's
    own counts beside the published ones."""
    by_key = {(r.model, r.dataset, r.schedule): r for r in rows if r.block is None}
    out = []
    for (model, dataset), published in suite.published_counts.items():
        baseline, (pub_flops, pub_mem) = next(iter(published.items()))
        base = by_key.get((model, dataset, baseline))
        name = f"{suite.labels.get((model, None), model)} {suite.labels.get((model, dataset), dataset)}"
        out += [f"#### {name}", "", "| " + " | ".join(COUNTS_HEAD) + " |", "|" + "---|" * len(COUNTS_HEAD)]
        for schedule, (flops, mem) in list(published.items())[1:]:
            row = by_key.get((model, dataset, schedule))
            label = suite.schedule_label(schedule)
            out.append("| " + " | ".join([
                label + (f" (`{schedule}`)" if label != schedule else ""),
                _count_ratio(row, base, "flops_ratio"), f"{flops / pub_flops:.2f}x",
                _count_ratio(row, base, "mem_ratio"), f"{mem / pub_mem:.2f}x", _how_it_ran(row)]) + " |")
        ours_flops, flops_value = _absolute(base, "flops")
        ours_mem, mem_value = _absolute(base, "mem")
        name = suite.schedule_label(baseline).capitalize()
        line = f"{name} ({_how_it_ran(base)}): {ours_flops} FLOPs and {ours_mem} memory accesses; published " \
            f"{pub_flops:,} and {pub_mem:,}" if flops_value or mem_value else \
            f"{name}: {_how_it_ran(base)}; published {pub_flops:,} FLOPs and {pub_mem:,} memory accesses"
        if flops_value and mem_value:
            line += f" (ours {flops_value / pub_flops:.2f}x and {mem_value / pub_mem:.2f}x the published)"
        out += ["", line + ".", ""]
    return out


def counts_section(db, suite, figure: str | None, page: str | None) -> str:
    """The generated Figure-14 part of the page (`suite.published_counts`)."""
    rows = suite_rows(db, suite)
    keys = {(r.model, r.dataset, r.schedule) for r in rows if r.block is None}
    wanted = [(m, d, s) for (m, d), counts in suite.published_counts.items() for s in counts]
    ran = sum(1 for key in wanted if key in keys)
    text = ["## Figure 14: FLOPs and memory accesses", "",
            f"Generated from `{os.path.basename(db.path)}` with the section above: the reference's Figure 14, each "
            f"configuration's simulator-counted FLOPs and memory accesses over unfused, ours beside the published "
            f"(the artifact's plotting defaults); {ran} of the {len(wanted)} rows it needs are in the database. "
            + COUNTING, ""] + counts_lines(rows, suite)
    if any(r.sampled for r in rows if (r.model, r.dataset, r.schedule) in set(wanted)):
        text += ["`ˢ`: the ratio rests on a sampled row (its own or unfused's), whose FLOPs and memory accesses "
                 "are totals estimated from the sampled windows; the database keeps a 95% interval for its "
                 "cycles only.", ""]
    if figure:
        link = os.path.relpath(figure, os.path.dirname(os.path.abspath(page))) if page else figure
        text += [f"![Figure 14: FLOPs against memory accesses over unfused, log-log]({link})", ""]
    return "\n".join(text).strip() + "\n"


def figure14_path(figure: str) -> str:
    """Where the Figure-14 chart goes beside the Figure-12 chart `figure`: `figure12` in its
    name becomes `figure14`, else `-figure14` is added before the suffix.

        >>> figure14_path("docs/figure12.png"), figure14_path("out/chart.pdf")
        ('docs/figure14.png', 'out/chart-figure14.pdf')
    """
    folder, name = os.path.split(figure)
    stem, suffix = os.path.splitext(name)
    return os.path.join(folder, name.replace("figure12", "figure14") if "figure12" in stem
                        else f"{stem}-figure14{suffix}")


def draw_figure14(rows: list[ResultRow], suite, path: str) -> str:
    """The Figure-14 chart of a suite's study rows (`suite.published_counts`), written atomically."""
    with atomic_path(path, "--figure") as temp:
        figure14_chart(rows, temp, counts=suite.published_counts, labels=suite.labels,
                       schedule_labels=suite.schedule_labels)
    return path


def in_figure_order(rows: list[ResultRow], published: dict) -> list[ResultRow]:
    """Rows ordered as the published entries list their cases (the paper's order), others after."""
    order = {key: n for n, key in enumerate(published)}
    models = {key[0]: n for n, key in reversed(list(enumerate(published)))}
    return sorted(rows, key=lambda r: (models.get(r.model, len(order)),
                                       order.get((r.model, r.dataset, r.block), len(order))))


def draw_figure(rows: list[ResultRow], suite, path: str, labels: dict | None = None) -> str:
    """The Figure-12 chart of a suite's study rows, written atomically to `path` (`labels`: the
    datasets' names, else the suite's)."""
    with atomic_path(path, "--figure") as temp:
        figure12_chart(in_figure_order(rows, suite.published), temp, published=suite.published, labels=labels or
                       suite.labels, notes=suite.notes)
    return path


def _replaced(old: str, begin: str, end: str, body: str) -> str | None:
    """`old` with what lies between `begin` and `end` (the markers included) replaced by `body`;
    None when it lacks them."""
    if begin not in old or end not in old:
        return None
    head, rest = old.split(begin, 1)
    return head + body + rest.split(end, 1)[1].lstrip("\n")


def _after_section(text: str, end: str, body: str) -> str:
    """`body` placed after the section that holds `end`: before the next level-2 heading after
    it, else at the end of `text`."""
    at = text.index(end)
    heading = text.find("\n## ", at)
    if heading < 0:
        return text.rstrip("\n") + "\n\n" + body
    return text[:heading + 1] + body + text[heading + 1:]


def write_page(db, suite, page: str | None = None, figure: str | None = None) -> list[str]:
    """Write the figure and the page (or the page's generated part, between its markers);
    returns the paths written. Where the suite has `published_counts`, the Figure-14 chart goes
    beside the figure (`figure14_path`) and its section after the suite's (between its own
    markers: where the page lacks them, before the next level-2 heading after the suite's section)."""
    written = []
    figure14 = figure14_path(figure) if figure and suite.published_counts else None
    if figure:
        rows = suite_rows(db, suite)
        draw_figure(rows, suite, figure)
        written.append(figure)
        if figure14:
            draw_figure14(rows, suite, figure14)
            written.append(figure14)
    if page:
        begin, end = f"<!-- suite {suite.name} begin -->", f"<!-- suite {suite.name} end -->"
        body = f"{begin}\n{section(db, suite, figure, page)}{end}\n"
        old = open(page, encoding="utf-8").read() if os.path.isfile(page) else ""
        text = _replaced(old, begin, end, body) or f"# Suite {suite.name}: results\n\n{suite.description}\n\n{body}"
        if suite.published_counts:
            begin14, end14 = f"<!-- suite {suite.name} figure14 begin -->", f"<!-- suite {suite.name} figure14 end -->"
            body14 = f"{begin14}\n{counts_section(db, suite, figure14, page)}{end14}\n"
            text = _replaced(text, begin14, end14, body14) or _after_section(text, end, body14)
        write_text(page, text, "--page")
        written.append(page)
    return written
