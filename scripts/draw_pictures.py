"""Draw the pictures in docs/pictures/: GCN (per layer and fully fused), GPT-3's attention,
overviews of multi-kernel schedules, a study chart, and a screenshot of a simulation report.

    .venv/bin/python scripts/draw_pictures.py          # about 30 s

The screenshot needs Debian's chromium and chromium-driver (scripts/setup.sh installs them).
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
from fuseflow.report.overview import render_overview  # noqa: E402
from fuseflow.sam.draw import render  # noqa: E402
from fuseflow.simreport import simulate_report  # noqa: E402
from fuseflow.studies.granularity import fusion_study, plot  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "docs" / "pictures"


def kernel_picture(compiled, index: int, name: str, what: str) -> None:
    kernel = compiled.kernels[index]
    title = f"{what}: kernel {kernel.index} ({', '.join(kernel.group)}), order {','.join(kernel.order)}"
    for suffix in ("png", "svg"):
        print("wrote", render(kernel.graph, str(OUT / f"{name}.{suffix}"), title=title))


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
    print("wrote", render_overview(compile_schedule(gcn.program, gcn.presets["unfused"]),
                                   str(OUT / "gcn_unfused_overview.png")))
    print("wrote", render_overview(partial, str(OUT / "gcn_partial_overview.png")))
    gpt = build("gpt3-bigbird", "tiny")
    blocks = compile_schedule(gpt.program, gpt.presets["partial"])
    attention = next(k.index for k in blocks.kernels if "t32" in k.group)
    kernel_picture(blocks, attention, "gpt3_attention", "GPT-3 attention (BigBird mask, 16x16 tiles)")
    rows = fusion_study(build("gcn", "synthetic:cora", scale=0.1), ["unfused", "partial", "full"])
    print("wrote", plot(rows, str(OUT / "gcn_study.png")))
    if shutil.which("chromium") and shutil.which("chromedriver"):  # a report as it shows in a browser
        page = Path(tempfile.mkdtemp()) / "gcn_partial_report.html"
        simulate_report(gcn.program, gcn.presets["partial"], gcn.inputs, path=str(page))
        screenshot(page, OUT / "gcn_partial_report.png")
        shutil.rmtree(page.parent)


if __name__ == "__main__":
    os.chdir(Path(__file__).resolve().parent.parent)
    main()
