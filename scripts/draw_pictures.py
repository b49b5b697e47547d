"""Draw the pictures in docs/pictures/ and docs/figure12.{png,pdf}: GCN (per layer and fully
fused) and GPT-3's attention, each in full (every primitive, for the screen) and compact (one box
per source op, for a paper's column); overviews of multi-kernel schedules and a study chart for a
column; the Figure-12 chart; a screenshot of a simulation report. Every picture also as PDF
(and SVG for graphs), from the same code.

    .venv/bin/python scripts/draw_pictures.py          # about a minute

Figure 12 is drawn from out/figure12.db (`scripts/results.sh` fills it) when it is there, else
from the rows docs/results.md's table records. The screenshot needs Debian's chromium and
chromium-driver (scripts/setup.sh installs them).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")

from fuseflow.fusion.compile import compile_schedule  # noqa: E402
from fuseflow.models.registry import build  # noqa: E402
from fuseflow.pipeline import prepared_request  # noqa: E402
from fuseflow.report.overview import render_overview  # noqa: E402
from fuseflow.sam.draw import render  # noqa: E402
from fuseflow.sam.opview import render_op_view  # noqa: E402
from fuseflow.simreport import simulate_report  # noqa: E402
from fuseflow.studies.db import SweepDB  # noqa: E402
from fuseflow.studies.granularity import fusion_study  # noqa: E402
from fuseflow.studies.plot import study_chart  # noqa: E402
from fuseflow.studies.suite.page import draw_figure, in_figure_order  # noqa: E402
from fuseflow.studies.suite.recorded import recorded_rows  # noqa: E402
from fuseflow.studies.suite.run import suite_rows  # noqa: E402
from fuseflow.studies.suite.spec import load_suite  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "pictures"


def kernel_picture(compiled, index: int, name: str, what: str) -> None:
    """The kernel in full (`name`.svg/.pdf/.png) and compact (`name`_ops.svg/.pdf/.png)."""
    kernel = compiled.kernels[index]
    title = f"{what}: kernel {kernel.index} ({', '.join(kernel.group)}), order {','.join(kernel.order)}"
    for suffix in ("png", "svg", "pdf"):
        print("wrote", render(kernel.graph, str(OUT / f"{name}.{suffix}"), title=title))
        print("wrote", render_op_view(kernel.graph, str(OUT / f"{name}_ops.{suffix}"), title=what))


def figure12() -> None:
    """docs/figure12.png and .pdf, from the suite's database or else the results page's table."""
    suite = load_suite("figure12")
    database = ROOT / "out" / "figure12.db"
    if database.is_file():
        db = SweepDB(str(database), readonly=True)
        rows, labels = suite_rows(db, suite), None
        db.close()
    else:
        rows, labels = recorded_rows((ROOT / "docs" / "results.md").read_text(encoding="utf-8"), suite)
    for suffix in ("png", "pdf"):
        print("wrote", draw_figure(in_figure_order(rows, suite.published), suite,
                                   str(ROOT / "docs" / f"figure12.{suffix}"), labels))


def screenshot(page: Path, path: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1600,900"):
        options.add_argument(flag)
    profile = tempfile.mkdtemp()
    options.add_argument(f"--user-data-dir={profile}")
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    try:
        driver.get(page.resolve().as_uri())
        time.sleep(0.5)
        driver.execute_script("document.querySelector('#tabs button[data-tab=k1]').click()")
        driver.find_element("id", "search").send_keys("n25\n")  # the array reading t7 (layer 1's output) in layer 2
        time.sleep(0.3)
        driver.save_screenshot(str(path))
        print("wrote", path)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    gcn = build("gcn", "karate")
    partial = compile_schedule(gcn.program, gcn.presets["partial"])
    kernel_picture(partial, 0, "gcn_layer1", "GCN layer 1 on the karate club")
    kernel_picture(partial, 1, "gcn_layer2", "GCN layer 2 (with softmax) on the karate club")
    full = compile_schedule(gcn.program, gcn.presets["full"])
    kernel_picture(full, 0, "gcn_full", "GCN fully fused on the karate club")
    unfused = compile_schedule(gcn.program, gcn.presets["unfused"])
    for suffix in ("png", "pdf"):
        print("wrote", render_overview(unfused, str(OUT / f"gcn_unfused_overview.{suffix}"), column=True))
        print("wrote", render_overview(partial, str(OUT / f"gcn_partial_overview.{suffix}"), column=True))
    gpt = build("gpt3-bigbird", "tiny")
    blocks = compile_schedule(gpt.program, gpt.presets["partial"])
    attention = next(k.index for k in blocks.kernels if "t32" in k.group)
    kernel_picture(blocks, attention, "gpt3_attention", "GPT-3 attention (BigBird mask, 16x16 tiles)")
    rows = fusion_study(build("gcn", "synthetic:cora", scale=0.1), ["unfused", "partial", "full"])
    for suffix in ("png", "pdf"):
        print("wrote", study_chart(rows, str(OUT / f"gcn_study.{suffix}")))
    figure12()
    if shutil.which("chromium") and shutil.which("chromedriver"):  # a report as it shows in a browser
        page = Path(tempfile.mkdtemp()) / "gcn_partial_report.html"
        simulate_report(prepared_request(gcn.program, gcn.presets["partial"], gcn.inputs), path=str(page))
        screenshot(page, OUT / "gcn_partial_report.png")
        shutil.rmtree(page.parent)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
