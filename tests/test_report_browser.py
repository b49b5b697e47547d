"""The HTML report in a real browser: Debian's Chromium, headless, driven by Selenium.

Each test loads a report file (no network), checks the graph rendered (as many drawn nodes as
the compact picture has), clicks a node and reads its details, follows a link of a deadlock
report to the node it names, and saves a screenshot. Skipped, with the reason, where Chromium,
its driver or Selenium is missing (scripts/setup.sh installs them as root).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

import fuseflow
from fuseflow import cli
from fuseflow.fusion.compile import compile_schedule
from fuseflow.sam.draw import hidden

MLIR = Path(__file__).parent / "mlir"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1600,1000"]

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
pytestmark = pytest.mark.skipif(not (os.access(CHROMIUM, os.X_OK) and os.access(DRIVER, os.X_OK)),
                                reason="Chromium and chromedriver are not installed (scripts/setup.sh installs "
                                       "Debian's chromium and chromium-driver as root)")


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="fuseflow-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _open(browser, path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(Path(path).resolve().as_uri())
    WebDriverWait(browser, 30).until(ec.presence_of_element_located((By.CSS_SELECTOR, ".pane.active svg g.node")))
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def _click(browser, css: str):
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR, css).click()


def _text(browser, css: str) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, css).text


def _screenshot(browser, path: Path) -> None:
    from PIL import Image

    assert browser.save_screenshot(str(path))
    image = Image.open(path).convert("L")
    low, high = image.getextrema()
    assert image.size[0] >= 800 and high - low > 100, "the screenshot shows something"


def test_compile_report_overview_kernel_and_node(tmp_path, browser):
    page = tmp_path / "compile.html"
    assert cli.main(["compile", str(MLIR / "matmul_chain.mlir"), "--schedule", "unfused", "--html", str(page)]) == 0
    compiled = compile_schedule(fuseflow.from_mlir(MLIR / "matmul_chain.mlir"), "unfused")
    _open(browser, page)
    # two kernels: the overview is shown first, with a box per kernel; clicking one opens its picture
    assert browser.execute_script("return document.querySelector('.pane.active').dataset.tab") == "overview"
    _click(browser, "#ov_k1")
    graph = compiled.kernels[1].graph
    drawn = len(graph.nodes) - len(hidden(graph))
    assert browser.execute_script("return document.querySelectorAll('.pane.active g.node[id^=k1_n]').length") == drawn
    scan = next(n for n in graph.nodes if n.kind == "scan")
    _click(browser, f"#k1_n{scan.id}")
    details = _text(browser, "#detail-body")
    assert details.startswith(f"n{scan.id} scan {scan.var}") and "tensor T mode 0" in details
    assert "O(i,j) = sum[k] T(i,k) * C(k,j)" in details  # the source op
    assert browser.execute_script(f"return document.getElementById('k1_n{scan.id}').classList.contains('selected')")
    _screenshot(browser, tmp_path / "compile.png")


def test_deadlock_report_links_the_nodes_it_names(tmp_path, browser, capsys):
    page = tmp_path / "deadlock.html"
    # bounded channels of 4 tokens cannot hold the softmax row its two passes share
    assert cli.main(["simulate", str(MLIR / "softmax_sparse.mlir"), "--depth", "4", "--html", str(page)]) == 2
    assert "deadlock" in capsys.readouterr().err
    _open(browser, page)
    assert "deadlock at cycle" in _text(browser, "#problems")
    links = browser.execute_script("return Array.from(document.querySelectorAll('#problems a.node-link'))"
                                   ".map(a => a.textContent)")
    assert links and all(x.startswith("n") for x in links)
    # a repeat-signal generator is not drawn: its link selects the repeat that stands for it
    repsig = next(x for x in links if "repsig" in _problem_entry(browser, x))
    browser.execute_script(f"Array.from(document.querySelectorAll('#problems a.node-link'))"
                           f".find(a => a.textContent === '{repsig}').click()")
    details = _text(browser, "#detail-body")
    assert details.startswith(f"{repsig} repsig") and "Not drawn (repsig): shown by n" in details
    assert "steps (busy cycles)" in details and "tokens" in details  # statistics of the unbounded run
    assert browser.execute_script("return document.querySelectorAll('g.node.selected').length") >= 1
    _screenshot(browser, tmp_path / "deadlock.png")


def _problem_entry(browser, node: str) -> str:
    """The words after `node` in the deadlock message (what it is and waits for)."""
    text = _text(browser, "#problems p")
    start = text.index(node + " ")
    return text[start:start + 40]


def test_simulation_report_search_and_statistics(tmp_path, browser):
    page = tmp_path / "sim.html"
    assert cli.main(["simulate", str(MLIR / "spmv.mlir"), "--html", str(page)]) == 0
    _open(browser, page)
    assert "outputs verified" in _text(browser, "header")
    search = browser.find_element("id", "search")
    search.send_keys("n14\n")  # the reduce of y = A·x
    details = _text(browser, "#detail-body")
    assert details.startswith("n14 reduce") and "steps (busy cycles)" in details
    assert "cycles" in _text(browser, "#kernel-table")
    _screenshot(browser, tmp_path / "sim.png")


def test_op_boxes_open_their_primitives_and_search_zooms_to_what_it_finds(tmp_path, browser):
    page = tmp_path / "full.html"
    assert cli.main(["compile", str(MLIR / "matmul_chain.mlir"), "--schedule", "full", "--html", str(page)]) == 0
    graph = compile_schedule(fuseflow.from_mlir(MLIR / "matmul_chain.mlir"), "full").kernels[0].graph
    _open(browser, page)
    active = "return document.querySelector('.pane.active').dataset.tab"
    view_box = "return document.querySelector('.pane.active svg').getAttribute('viewBox')"
    # the toolbar's `ops` shows one box per source op; clicking a box opens its primitives, zoomed to them
    _click(browser, "#view-toggle")
    assert browser.execute_script(active) == "k0ops"
    assert browser.execute_script("return document.querySelectorAll('.pane.active g.node[id^=k0_box_]').length") \
        == len(graph.ops)
    _click(browser, "#k0_box_T")
    assert browser.execute_script(active) == "k0"
    assert browser.execute_script("return document.querySelector('g.cluster.selected').id").startswith("k0_op_T_")
    assert "T(i,k) = sum[l]" in _text(browser, "#detail-body")
    # a search by the words of a label goes to each match in turn, zoomed in
    _click(browser, "#zoom-fit")
    home = browser.execute_script(view_box)
    search = browser.find_element("id", "search")
    search.send_keys("spacc\n")
    accumulators = [n for n in graph.nodes if n.kind == "spacc"]
    assert _text(browser, "#hint") == f"match 1 of {len(accumulators)} (Enter: next)"
    assert _text(browser, "#detail-body").split()[1] == "spacc"
    assert browser.execute_script(view_box) != home
    search.send_keys("\n")
    assert _text(browser, "#hint").startswith(f"match {min(2, len(accumulators))} of")
    search.clear()
    search.send_keys("O\n")  # an op's name: its box in the picture of primitives
    assert browser.execute_script("return document.querySelector('g.cluster.selected').id").startswith("k0_op_O_")
    search.clear()
    search.send_keys("no such thing\n")
    assert _text(browser, "#hint") == "nothing matches no such thing"


def test_a_large_kernel_opens_on_its_boxes_of_ops(tmp_path, browser):
    page = tmp_path / "gcn.html"
    assert cli.main(["compile", "--model", "gcn", "--dataset", "karate", "--schedule", "full",
                     "--html", str(page)]) == 0
    _open(browser, page)  # one kernel of 89 primitives: its compact picture first, a box per op
    assert browser.execute_script("return document.querySelector('.pane.active').dataset.tab") == "k0ops"
    assert browser.execute_script("return document.querySelectorAll('.pane.active g.node').length") == 12
    assert _text(browser, "#view-toggle") == "primitives"
