"""`fuseflow study suite [figure12|FILE.toml]`: a suite of fusion studies on dask into SQLite,
resumable, with its rows as JSON or CSV, its Figure-12 chart (and Figure-14 chart, where the suite
has published counts) and its results page.

    fuseflow study suite figure12 --db figure12.db                 # a local cluster sized to the machine
    fuseflow study suite mine.toml --db mine.db --scheduler tcp://host:8786 --json
    fuseflow study suite figure12 --db figure12.db --page docs/results.md --figure docs/figure12.png
    fuseflow plot figure12.db --figure 12 -o figure12.png
    fuseflow plot figure12.db --figure 14 -o figure14.png
"""
from __future__ import annotations

import json
import os
import sys

from ..errors import UserError
from ..files import check_output
from ..studies.db import open_existing
from ..studies.row import ResultRow
from ..studies.suite.page import draw_figure, draw_figure14, write_page
from ..studies.suite.run import run_suite, study_rows, suite_rows
from ..studies.suite.spec import BUILT_IN, Suite, load_suite
from ..tables import to_csv

EXPORTED = ("model", "dataset", "block", "seed", "schedule", "status", "kernels", "cycles", "model_cycles",
            "speedup", "flops_ratio", "mem_ratio", "flops", "mem", "verified", "est_cycles", "skipped", "error",
            "wall", "schedule_text")


def exported(rows: list[ResultRow]) -> list[dict]:
    """The rows users get (`--json`, `--csv`): the study's columns, in a fixed order (`verified` a bool)."""
    return [{**r.view(EXPORTED), "verified": r.verified} for r in rows]


def run(args) -> int:
    for path, flag, suffixes in ((args.csv, "--csv", (".csv",)), (args.page, "--page", (".md",)),
                                 (args.figure, "--figure", (".png", ".svg", ".pdf"))):
        if path:
            check_output(path, flag, suffixes)
    if args.scheduler and args.executor == "serial":
        raise UserError("--scheduler needs the dask executor", "--executor", "leave out --executor serial")
    suite = load_suite(args.suite)
    summary = run_suite(suite, args.db, executor=args.executor, scheduler=args.scheduler, workers=args.workers,
                        max_memory=args.max_memory, progress=not args.quiet, limit=args.limit,
                        retry_failed=args.retry_failed)
    if args.tune:
        from ..tuner.suite import run_tunes  # noqa: PLC0415 - the tuner loads the simulator

        say = None if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
        tuned = run_tunes(suite, args.db, args.tune, executor=args.executor, scheduler=args.scheduler,
                          workers=args.workers, max_memory=args.max_memory, limit=args.limit, say=say)
        if not args.quiet:
            print(f"suite {suite.name} tuned: {tuned.tuned} rows tuned, {tuned.failed} not, {tuned.done_before} "
                  f"done before; {tuned.seconds:.1f} s", file=sys.stderr)
    db = open_existing(args.db)
    try:
        rows = suite_rows(db, suite)
        if args.page or args.figure:
            for path in write_page(db, suite, page=args.page, figure=args.figure):
                print(f"wrote {path}", file=sys.stderr)
    finally:
        db.close()
    if args.csv:
        to_csv(exported(rows), args.csv)
        print(f"wrote {args.csv}", file=sys.stderr)
    if args.json:
        print(json.dumps(exported(rows), indent=1))
    elif not args.quiet:
        print(f"suite {suite.name}: {summary.simulated} simulated, {summary.estimated} estimated, "
              f"{summary.failed} failed, {summary.done_before} done before; {summary.seconds:.1f} s on "
              f"{summary.workers} worker{'s' if summary.workers != 1 else ''}; {len(rows)} rows in {args.db}")
    return 0


def figure(args) -> int:
    """`plot DB --figure 12` (or 14): the Figure-12 chart of the suite in DB (`--suite`, else the
    suite that wrote the rows: a built-in one's published numbers are drawn beside), or its
    Figure-14 chart (a suite with `[[published_counts]]`)."""
    db = open_existing(args.db)
    try:
        return _figure(args, db)
    finally:
        db.close()


def _figure(args, db) -> int:
    if args.figure not in ("12", "14"):
        raise UserError(f"no figure {args.figure!r}", "--figure", "the figures drawn are 12 (the fusion suite) and 14 "
                        "(its FLOPs and memory accesses)")
    rows = [r for r in db.rows() if r.suite]
    if not rows:
        raise UserError(f"{args.db} has no suite rows", f"plot --figure {args.figure}",
                        "run `fuseflow study suite` into it first")
    name = args.suite or rows[-1].suite
    suite = load_suite(name) if args.suite or name in BUILT_IN else Suite(name, [])
    if suite.cases:
        study = suite_rows(db, suite)
    else:
        study = study_rows([r for r in rows if r.suite == name])
    if not study:
        raise UserError(f"{args.db} has no rows of suite {suite.name}", "--suite", "name the suite that wrote them")
    if args.figure == "14" and not suite.published_counts:
        raise UserError(f"suite {suite.name} has no published counts", "--figure 14",
                        "Figure 14 needs a suite with [[published_counts]], e.g. --suite figure12")
    out = args.output or os.path.splitext(args.db)[0] + f"-figure{args.figure}.png"
    check_output(out, "-o", (".png", ".svg", ".pdf"))
    (draw_figure14 if args.figure == "14" else draw_figure)(study, suite, out)
    print(f"wrote {out}")
    return 0
