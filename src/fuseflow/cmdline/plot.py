"""`fuseflow plot DB`: charts and the heuristic's and pruning's statistics of a sweep database;
with `--figure 12`, a suite's Figure-12 chart (`cmdline.suite.figure`).

    fuseflow plot sweep.db -o charts/
    fuseflow plot figure12.db --figure 12 -o figure12.png
"""
from __future__ import annotations

import os
import tempfile

from ..errors import UserError
from ..studies.analysis import summary_text
from ..studies.db import open_existing
from ..studies.plot import draw
from .suite import figure
from .sweep import floats


def run(args) -> int:
    if args.figure:
        return figure(args)
    return _charts(args)


def _charts(args) -> int:
    db = open_existing(args.db)
    try:
        rows = db.rows()
    finally:
        db.close()
    if args.program:
        rows = [r for r in rows if r.program == args.program]
    if not rows:
        raise UserError(f"{args.db} has no rows" + (f" for program {args.program}" if args.program else ""),
                        "plot", "run a sweep into it first")
    factors = floats([args.factors], "--factors") if args.factors else [1.25, 1.5, 2.0, 3.0]
    print(summary_text(rows, factors))
    if not args.no_charts:
        out = args.output or os.path.splitext(args.db)[0] + "-charts"
        parent = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(parent) or (os.path.exists(out) and not os.path.isdir(out)):
            raise UserError(f"directory {parent} does not exist" if not os.path.isdir(parent)
                            else f"{out} exists and is not a directory", "-o",
                            "give a directory to create or fill with the charts")
        paths = _draw_atomically(rows, out, parent, args.format)
        print(f"wrote {len(paths)} charts to {out}/")
    return 0


def _draw_atomically(rows, out: str, parent: str, fmt: str = "png") -> list[str]:
    """Draw the charts into a temporary directory beside `out`, then move each into `out`: a
    failure part-way leaves no half-written chart there."""
    try:
        with tempfile.TemporaryDirectory(prefix=".charts-", dir=parent) as temp:
            drawn = draw(rows, temp, fmt=fmt)
            os.makedirs(out, exist_ok=True)
            paths = [os.path.join(out, os.path.basename(p)) for p in drawn]
            for source, target in zip(drawn, paths):
                os.replace(source, target)
    except OSError as err:
        raise UserError(f"cannot write charts to {out}: {err.strerror}", "-o") from None
    return paths
