"""A suite's rows read back from the table its results page records (`page.table_lines`), to
redraw the chart where the database is not at hand: speedups as the page rounds them, `~`
(estimated) kept, failed cells as errors, and the page's names of the datasets.

    >>> from .page import table_lines
    >>> from .spec import load_suite
    >>> suite = load_suite("figure12")
    >>> rows = [ResultRow(s, model="gcn", dataset="cora", speedup=v, cycles=c, flops_ratio=1.0, wall_seconds=1.0,
    ...                   estimated_ratios=s == "full")
    ...         for s, v, c in (("unfused", 1.0, 100), ("partial", 1.6, 62), ("full", 0.3, 333))]
    >>> page = "<!-- suite figure12 begin -->\\n" + "\\n".join(table_lines(rows, suite.published, suite.labels))
    >>> back, labels = recorded_rows(page, suite)
    >>> [(r.schedule, r.speedup, r.estimated_ratios) for r in back]
    [('unfused', 1.0, False), ('partial', 1.6, False), ('full', 0.3, True)]
    >>> labels[("gcn", "cora")]
    'Cora'
"""
from __future__ import annotations

import re

from ...errors import UserError
from ..row import ResultRow
from .page import HEAD

SCHEDULES = ("partial", "full")


def _key(suite, model_name: str, dataset_name: str) -> tuple[str, str, int | None]:
    """(model, dataset, block) of a table line's names (`GPT-3 + BigBird`, `GPT-3 Small b32`)."""
    models = {name: m for (m, d), name in suite.labels.items() if d is None}
    model = models.get(model_name, model_name)
    found = re.fullmatch(r"(.*?)(?: b(\d+))?", dataset_name)
    name, block = found.group(1), int(found.group(2)) if found.group(2) else None
    plain = re.sub(r"\s*\(synthetic\)$", "", name)
    for (m, dataset), label in suite.labels.items():
        if m == model and dataset is not None and label in (name, plain):
            return model, dataset, block
    tasks = {(t.model, t.dataset) for t in suite.tasks()}
    if (model, name) in tasks:
        return model, name, block
    raise UserError(f"the results page names {model_name} {dataset_name!r}, which suite {suite.name} does not have",
                    "results page", "regenerate the page from the suite's database")


def _cell(text: str) -> dict | None:
    """A speedup cell's fields: `1.67x`, `~0.33x` (estimated), `failed`; None for `-` or `not run`."""
    if text == "failed":
        return {"status": "error", "error": "failed (as the results page records)"}
    found = re.fullmatch(r"(~?)([\d.]+)x", text)
    return {"speedup": float(found.group(2)), "estimated_ratios": bool(found.group(1))} if found else None


def recorded_rows(page: str, suite) -> tuple[list[ResultRow], dict]:
    """(study rows, the page's labels {(model, dataset): name}) of the table between the page's
    `<!-- suite NAME begin -->` marker and its end."""
    begin = f"<!-- suite {suite.name} begin -->"
    if begin not in page:
        raise UserError(f"the results page has no section of suite {suite.name}", "results page",
                        f"it starts with {begin}")
    section = page.split(begin, 1)[1].split(f"<!-- suite {suite.name} end -->", 1)[0]
    head = "| " + " | ".join(HEAD) + " |"
    lines = section.splitlines()
    if head not in lines:
        raise UserError("the results page's table has other columns than this version writes", "results page",
                        "regenerate the page from the suite's database")
    rows, labels = [], dict(suite.labels)
    for line in lines[lines.index(head) + 2:]:
        if not line.startswith("|"):
            break
        cells = dict(zip(HEAD, (c.strip() for c in line.strip().strip("|").split("|"))))
        model, dataset, block = _key(suite, cells["model"], cells["dataset"])
        labels[(model, dataset)] = re.sub(r" b\d+$", "", cells["dataset"])
        case = {"model": model, "dataset": dataset, "block": block}
        rows.append(ResultRow("unfused", **case, speedup=1.0, estimated_ratios=cells["unfused cycles"].startswith("~")))
        for schedule in SCHEDULES:
            found = _cell(cells[schedule])
            if found is not None:
                rows.append(ResultRow(schedule, **case, **found))
    return rows, labels
