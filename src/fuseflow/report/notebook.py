"""What Jupyter shows for fuseflow's objects: the `_repr_svg_` / `_repr_html_` bodies.

A graph shows its picture (`sam.draw`, `SamGraph._repr_svg_`); a compiled schedule its overview
(several kernels) or its one kernel's picture, with a table of the kernels; a simulation result
its totals and a table per kernel; a fusion study its table (`study.StudyTable`, built with
`table_html`).

    >>> table_html(["kernel", "cycles"], [["k0", "1,200"]]).count("<td")
    2
"""
from __future__ import annotations

import html

from ..sam.draw import svg
from .html import METRICS, _inline_svg
from .overview import kernel_title, ops_text, overview_svg

STYLE = "border-collapse:collapse;font-size:12px"
CELL = "padding:2px 8px;border-bottom:1px solid #ddd;text-align:right"


def table_html(headers: list[str], rows: list[list[str]]) -> str:
    """An HTML table of `rows` (cells already escaped) under `headers`."""
    head = "".join(f'<th style="{CELL}">{html.escape(h)}</th>' for h in headers)
    body = "".join("<tr>" + "".join(f'<td style="{CELL}">{c}</td>' for c in row) + "</tr>" for row in rows)
    return f'<table style="{STYLE}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def compiled_html(compiled) -> str:
    """The overview (or the one kernel's picture) and a table of the kernels."""
    pictured = [k for k in compiled.kernels if not k.is_reshape]
    if len(compiled.kernels) == 1 and pictured:
        k = pictured[0]
        picture = svg(k.graph, title=kernel_title(k))
    else:
        picture = overview_svg(compiled)
    rows = [[f"k{k.index}", html.escape(ops_text(k.group)), html.escape(",".join(k.order)),
             "reshape" if k.is_reshape else str(len(k.graph.nodes))] for k in compiled.kernels]
    return (f"<div><b>{html.escape(compiled.program.name)}</b> <code>{html.escape(str(compiled.schedule))}</code>"
            f"{table_html(['kernel', 'ops', 'order', 'nodes'], rows)}{_inline_svg(picture)}</div>")


def result_html(result) -> str:
    """A SimResult's totals and one row per kernel."""
    status = "outputs verified" if result.verified else "outputs not checked"
    head = (f"<b>{html.escape(result.program)}</b> <code>{html.escape(result.schedule)}</code>: "
            f"{result.cycles:,} cycles, {status} (max abs error {result.max_abs_error:.2e})")
    rows = [[f"k{k.index}", html.escape(ops_text(k.group)), html.escape(",".join(k.order))]
            + [f"{getattr(k, key):,}" for key, _ in METRICS] for k in result.kernels]
    rows.append(["total", "", ""] + [f"{getattr(result, key):,}" for key, _ in METRICS])
    return f"<div>{head}{table_html(['kernel', 'ops', 'order'] + [t for _, t in METRICS], rows)}</div>"

