"""Suites (`fuseflow study suite`): TOML definitions, the built-in figure12, rows in the sweep
store (schema upgrade, resume without duplicates), the results page and the Figure-12 chart."""
from __future__ import annotations

import json
import os
import sqlite3

import pytest
from cli_helpers import error_of

from fuseflow.cli import main
from fuseflow.errors import UserError
from fuseflow.models.registry import build
from fuseflow.studies.db import COLUMNS_2, COLUMNS_3, SCHEMA_VERSION, SweepDB
from fuseflow.studies.granularity import fusion_study
from fuseflow.studies.row import ResultRow
from fuseflow.studies.suite.page import write_page
from fuseflow.studies.suite.run import run_suite, study_rows, suite_rows
from fuseflow.studies.suite.spec import load_suite, parse_suite

KARATE = """
[suite]
name = "karate"
schedules = ["unfused", "partial", "full"]
[[case]]
model = "gcn"
datasets = ["karate"]
[[case]]
model = "graphsage"
datasets = ["karate"]
max_tokens = 10000   # beyond: unfused, partial sampled (kernels too small: run whole), full left to the heuristic
                     # (its one kernel, too small to sample, over 20x this)
[[published]]
model = "gcn"
dataset = "karate"
label = "Karate"
unfused = 100
partial = 50
full = 400
"""


def test_figure12_is_built_in():
    suite = load_suite("figure12")
    tasks = suite.tasks()
    assert len(tasks) == 76 and len({t.key for t in tasks}) == 76
    cases = {(t.model, t.dataset, t.block) for t in tasks}
    for model in ("gcn", "graphsage"):
        for dataset in ("cora", "cora_ml", "citeseer", "dblp", "synthetic:collab", "synthetic:mag"):
            assert (model, dataset, None) in cases
    assert {("gpt3-bigbird", "small2", b) for b in (16, 32, 64)} | {("sae", d, None) for d in
                                                                    ("imagenet", "nih-cxr", "luna16")} <= cases
    # GPT-3 as the reference ran it: scalar streams, the block only shaping the mask
    gpt3 = [t for t in tasks if t.model == "gpt3-bigbird"]
    assert len(gpt3) == 9 and not any(t.tiled for t in gpt3) and gpt3[0].data == "dataset=small2 block=16 scalar"
    # published speedups as the reference lists them (§6.2)
    pub = suite.published[("gcn", "synthetic:collab", None)]
    assert round(pub["unfused"] / pub["partial"], 2) == 2.58
    assert all(t.schedule in ("unfused", "partial", "full", "full order=reference", "layer1", "layer2")
               and t.baseline == "unfused" for t in tasks)
    # the graph models' full fusion also with the reference compiler's order, beside every default row
    variants = {(t.model, t.dataset) for t in tasks if t.schedule == "full order=reference"}
    assert variants == {(t.model, t.dataset) for t in tasks if t.model in ("gcn", "graphsage")}
    assert sum(t.schedule in ("unfused", "partial", "full") for t in tasks) == 54
    # Figure 14's configurations: GCN with one layer fused, on every dataset but the MAG twin
    for layer in ("layer1", "layer2"):
        assert {(t.model, t.dataset) for t in tasks if t.schedule == layer} == \
            {("gcn", d) for d in ("synthetic:collab", "dblp", "cora_ml", "citeseer", "cora")}
    assert suite.schedule_labels == {"layer1": "only layer 1 fused", "layer2": "only layer 2 fused"}


def test_figure12_holds_the_published_figure14_counts():
    """The reference's Figure 14 (GCN), each configuration's FLOPs and memory accesses over unfused,
    as the reference's plot gives them."""
    counts = load_suite("figure12").published_counts
    published = {"cora_ml": ((8.47, 6.93), (0.82, 0.62), (1.00, 1.00), (0.82, 0.62)),
                 "dblp": ((11.73, 10.30), (1.00, 0.78), (1.00, 1.00), (1.00, 0.78)),
                 "synthetic:collab": ((18.59, 15.82), (1.00, 0.80), (1.00, 0.99), (1.00, 0.79))}
    assert list(counts) == [("gcn", d) for d in published]
    for dataset, ratios in published.items():
        case = counts[("gcn", dataset)]
        assert list(case) == ["unfused", "full", "layer1", "layer2", "partial"]
        (flops, mem), rest = case["unfused"], list(case.values())[1:]
        assert [(round(f / flops, 2), round(m / mem, 2)) for f, m in rest] == list(ratios)
    assert [round(v / 1e6, 1) for v in counts[("gcn", "cora_ml")]["unfused"]] == [292.4, 493.7]


@pytest.mark.parametrize("text, message", [
    ('[[case]]\nmodel = "gcn"\ndatasets = ["karate"]\ncolour = 1', "unknown key 'colour'"),
    ('[[case]]\nmodel = "resnet"\ndatasets = ["x"]', "unknown model 'resnet'"),
    ('[suite]\nname = "x"', "has no [[case]]"),
    ('[[case]]\nmodel = "gpt3-bigbird"\ndatasets = ["tiny"]\nblocks = [0]', "block 0"),
    ('[[case]]\nmodel = "gcn"\ndatasets = []', "no datasets"),
    ('[suite]\nseeds = [-1]\n[[case]]\nmodel = "gcn"\ndatasets = ["karate"]', "seeds"),
    ('[suite\n', "not valid TOML"),
    ('[sweep]\n', "unknown table 'sweep'"),
    ('[[case]]\nmodel = "gcn"\ndatasets = ["karate"]\nvariants = ["full"]', "variant 'full' of bad.toml"),
    ('[[case]]\nmodel = "gcn"\ndatasets = ["karate"]\nvariants = [" "]', "variant ' ' in bad.toml"),
    ('[[case]]\nmodel = "gcn"\ndatasets = ["karate"]\nvariants = [{schedule = "layer1", name = "x"}]',
     "unknown key 'name' in bad.toml [[case]] 1 variant 1"),
    ('[[case]]\nmodel = "gcn"\ndatasets = ["karate"]\nvariants = [{label = "x"}]', "variant None in bad.toml"),
    ('[[case]]\nmodel = "gcn"\ndatasets = ["karate"]\nvariants = [{schedule = "layer1", label = "a"}]\n'
     '[[case]]\nmodel = "gcn"\ndatasets = ["cora"]\nvariants = [{schedule = "layer1", label = "b"}]',
     "variant 'layer1' of bad.toml [[case]] 2 is labelled 'b', elsewhere 'a'"),
    ('[[case]]\nmodel = "gcn"\ndatasets = ["karate"]\n[[published_counts]]\nmodel = "gcn"\ndataset = "cora"\n'
     'unfused = [1, 2]', "no case runs gcn on cora"),
    ('[[case]]\nmodel = "gcn"\ndatasets = ["karate"]\n[[published_counts]]\nmodel = "gcn"\ndataset = "karate"\n'
     'unfused = [1, 2]\nlayer1 = [1, 2]', "'layer1' is not a schedule or variant of that case"),
    ('[[case]]\nmodel = "gcn"\ndatasets = ["karate"]\n[[published_counts]]\nmodel = "gcn"\ndataset = "karate"\n'
     'unfused = [1, 2]\nfull = [1]', "full must be [FLOPs, memory accesses]"),
    ('[[case]]\nmodel = "gcn"\ndatasets = ["karate"]\n[[published_counts]]\nmodel = "gcn"\ndataset = "karate"\n'
     'full = [1, 2]', "no counts for the baseline 'unfused'"),
    ('[[case]]\nmodel = "gcn"\ndatasets = ["karate"]\ntiled = false', "gcn has no tiles to turn off"),
    ('[[case]]\nmodel = "gpt3-bigbird"\ndatasets = ["tiny"]\n[[case]]\nmodel = "gpt3-bigbird"\n'
     'datasets = ["tiny"]\ntiled = false', "runs gpt3-bigbird tiny block None both tiled and scalar"),
])
def test_bad_suite_files(text, message):
    with pytest.raises(UserError, match=message.replace("[", r"\[")):
        parse_suite(text, "bad.toml")


def test_unknown_suite_is_one_line(capsys, tmp_path):
    assert "no built-in suite 'figure13'" in error_of(["study", "suite", "figure13", "--db",
                                                       str(tmp_path / "x.db")], capsys)


def _old_database(path: str, version: int) -> None:
    """A sweep database as schema 1 (no suite columns, no sessions) or 2 (no sampled rows' columns)
    wrote it."""
    db = SweepDB(path)
    db.insert(ResultRow("full", program="p.mlir", data="density=0.1", seed=0, cycles=7))
    columns = [name for name, _, _ in (COLUMNS_2 + COLUMNS_3 if version == 1 else COLUMNS_3)]
    db.close()
    conn = sqlite3.connect(path)
    if version == 1:
        conn.execute("DROP TABLE sessions")
    for name in columns:
        conn.execute(f"ALTER TABLE runs DROP COLUMN {name}")
    conn.execute(f"PRAGMA user_version={version}")
    conn.commit()
    conn.close()


def test_schema_1_database_is_upgraded_in_place(tmp_path):
    path = str(tmp_path / "old.db")
    _old_database(path, 1)
    ro = SweepDB(path, readonly=True)  # read as it is
    assert ro.version == 1 and ro.rows()[0].cycles == 7 and ro.sessions() == []
    ro.close()
    db = SweepDB(path)
    assert db.version == SCHEMA_VERSION and db.rows()[0].cycles == 7
    assert db.rows()[0].reason is None and db.sessions() == []
    db.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_schema_2_database_gains_the_sampled_columns(tmp_path):
    path = str(tmp_path / "v2.db")
    _old_database(path, 2)
    with pytest.raises(sqlite3.OperationalError):  # read as it is: no mode column yet
        SweepDB(path, readonly=True).conn.execute("SELECT mode FROM runs")
    db = SweepDB(path)
    row = db.rows()[0]
    assert db.version == SCHEMA_VERSION == 3 and row.cycles == 7 and row.mode is None
    db.insert(ResultRow("full", program="q.mlir", data="density=0.1", seed=0, cycles=9, mode="sampled", cycles_low=8,
                        cycles_high=10, sampled_fraction=0.05))
    assert [r.mode for r in db.rows()] == [None, "sampled"]
    db.close()


def test_a_database_with_text_in_a_number_column_is_one_line(tmp_path, capsys):
    """Issue #40: a row whose cycles hold text (a file edited by hand) is refused when the file is
    opened, naming the database, table, column and row, and left as it was."""
    path, spec = str(tmp_path / "edited.db"), tmp_path / "karate.toml"
    spec.write_text(KARATE)
    db = SweepDB(path)
    db.insert(ResultRow("full", program="p.mlir", data="density=0.1", seed=0, cycles=7))
    db.close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE runs SET cycles = 'lots' WHERE id = 1")
    conn.commit()
    conn.close()
    line = error_of(["study", "suite", str(spec), "--db", path, "--executor", "serial", "-q"], capsys)
    assert f"{path}: table runs, column cycles, row 1 holds text 'lots', not a number" in line
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT cycles FROM runs").fetchall() == [("lots",)]
    conn.close()


@pytest.fixture(scope="module")
def karate_db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("suite") / "karate.db")
    suite = parse_suite(KARATE, "karate.toml")
    summary = run_suite(suite, path, executor="serial", progress=False)
    return suite, path, summary


def test_serial_suite_rows_are_the_studys(karate_db):
    suite, path, summary = karate_db
    assert (summary.planned, summary.simulated, summary.estimated, summary.failed) == (6, 5, 1, 0)
    db = SweepDB(path, readonly=True)
    rows = suite_rows(db, suite)
    db.close()
    study = fusion_study(build("gcn", "karate"), ["unfused", "partial", "full"])
    for ours, theirs in zip(rows[:3], study):
        for key in ("schedule", "kernels", "cycles", "flops", "mem", "speedup", "flops_ratio", "mem_ratio"):
            assert getattr(ours, key) == getattr(theirs, key), key
        assert ours.verified is True
    estimated = rows[5]
    assert estimated.schedule == "full" and estimated.status == "estimated"
    assert "token events > 1e+04" in estimated.reason and estimated.speedup > 0
    assert "which a sample runs whole" in estimated.reason
    db = SweepDB(path, readonly=True)
    by_label = {(r.model, r.label): r for r in db.rows()}
    db.close()
    whole = by_label[("graphsage", "partial")]  # beyond max_tokens, sampled: a kernel of 34 rows runs whole
    assert (whole.mode, whole.cycles_low, whole.cycles_high, whole.sampled_fraction) == \
        ("sharded", whole.cycles, whole.cycles, 1.0) and "too few for a sample" in whole.method
    last = by_label[("graphsage", "full")]
    assert last.mode == "heuristic" and last.method.startswith("the heuristic's estimate (last resort)")


def test_resume_runs_nothing_twice(karate_db):
    suite, path, _ = karate_db
    again = run_suite(suite, path, executor="serial", progress=False)
    assert (again.done_before, again.simulated + again.estimated + again.failed) == (6, 0)
    db = SweepDB(path, readonly=True)
    assert db.count() == 6 and len(db.sessions("karate")) == 1  # nothing ran: no session
    assert db.sessions("karate")[0]["finished"] == 6 and db.sessions("karate")[0]["seconds"] > 0
    db.close()


def test_page_keeps_hand_written_text_and_draws_the_figure(karate_db, tmp_path):
    suite, path, _ = karate_db
    page, figure = str(tmp_path / "results.md"), str(tmp_path / "fig.png")
    with open(page, "w") as handle:
        handle.write("# Results\n\nabove\n\n<!-- suite karate begin -->\nold\n<!-- suite karate end -->\n\nbelow\n")
    db = SweepDB(path, readonly=True)
    assert write_page(db, suite, page=page, figure=figure) == [figure, page]
    db.close()
    text = open(page).read()
    assert text.startswith("# Results\n\nabove\n") and text.rstrip().endswith("below") and "old" not in text
    assert "| GCN | Karate | " in text and "| partial ✓ |" in text and "2.00x / 0.25x" in text
    assert "GraphSAGE karate full: the heuristic's estimate (the last resort), not simulated: estimated" in text
    assert "![Figure 12" in text and "fig.png" in text and "in 1 session on 1 worker." in text
    with open(figure, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli_json_csv_and_plot(karate_db, tmp_path, capsys):
    _, path, _ = karate_db
    suite_file = tmp_path / "karate.toml"
    suite_file.write_text(KARATE)
    csv = str(tmp_path / "rows.csv")
    assert main(["study", "suite", str(suite_file), "--db", path, "--json", "--csv", csv, "-q"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["schedule"] for r in rows] == ["unfused", "partial", "full"] * 2
    assert rows[0]["speedup"] == 1.0 and rows[5]["skipped"] and rows[5]["status"] == "estimated"
    assert open(csv).read().splitlines()[0].startswith("model,dataset,block,seed,schedule,status")
    out = str(tmp_path / "f.png")
    assert main(["plot", path, "--figure", "12", "-o", out]) == 0
    assert os.path.getsize(out) > 10_000
    assert "no figure '13'" in error_of(["plot", path, "--figure", "13"], capsys)


def test_ratios_wait_for_the_baseline():
    rows = [ResultRow("partial", program="model:gcn", data="dataset=k", seed=0, model="gcn", dataset="k",
                      label="partial", kernels=2, cycles=10, flops=1, mem_reads=1, mem_writes=1, verified=True,
                      wall_seconds=0.1, est_cycles=9.0, est_flops=1.0)]
    study = study_rows(rows, {("model:gcn", "dataset=k", 0): "unfused"})
    assert study[0].speedup is None


def test_retry_failed_runs_the_failed_rows_again(tmp_path, monkeypatch, capsys):
    """A resumed suite keeps its failed rows; `--retry-failed` runs those tasks, and only those, again."""
    import fuseflow.studies.suite.run as run

    suite_file = tmp_path / "retry.toml"
    suite_file.write_text('[suite]\nname = "retry"\nschedules = ["unfused", "partial", "full"]\n'
                          '[[case]]\nmodel = "gcn"\ndatasets = ["karate"]\n')
    suite, path = load_suite(str(suite_file)), str(tmp_path / "retry.db")
    study = run.study_schedule

    def full_fails(case, name, *args, **kwargs):
        if name == "full":
            raise MemoryError
        return study(case, name, *args, **kwargs)

    monkeypatch.setattr(run, "study_schedule", full_fails)
    first = run_suite(suite, path, executor="serial", progress=False)
    assert (first.simulated, first.failed) == (2, 1)
    monkeypatch.setattr(run, "study_schedule", study)
    resumed = run_suite(suite, path, executor="serial", progress=False)
    assert (resumed.done_before, resumed.simulated + resumed.failed) == (3, 0)
    db = SweepDB(path, readonly=True)
    before = {r.schedule: r for r in db.rows()}
    db.close()
    assert before["full"].status == "error" and "ran out of memory" in before["full"].error
    assert main(["study", "suite", str(suite_file), "--db", path, "--executor", "serial", "--retry-failed",
                 "-q"]) == 0
    db = SweepDB(path, readonly=True)
    after = {r.schedule: r for r in db.rows()}
    assert db.count() == 3 and len(db.sessions("retry")) == 2
    db.close()
    assert after["full"].status == "ok" and after["full"].verified == 1
    assert {k: after[k].id for k in ("unfused", "partial")} == {k: before[k].id for k in ("unfused", "partial")}


def test_page_and_chart_mark_a_sampled_row(tmp_path):
    """A sampled row shows its speedup's interval and `ˢ` in the table, a note with its sample,
    and an error bar on the chart."""
    suite = parse_suite(KARATE, "karate.toml")
    path = str(tmp_path / "sampled.db")
    db = SweepDB(path)
    db.start_session("karate", 3, 1, "serial", None)
    for schedule, cycles, extra in (("unfused", 100, {"mode": "whole"}),
                                    ("partial", 50, {"mode": "sampled", "cycles_low": 45, "cycles_high": 55,
                                                     "sampled_fraction": 0.05, "method": "stratified regression"}),
                                    ("full", 400, {"mode": "whole"})):
        db.insert(ResultRow(schedule, program="model:gcn", data="dataset=karate", seed=0, model="gcn", dataset="karate",
                            label=schedule, cycles=cycles, flops=1, mem_reads=1, mem_writes=1, kernels=1,
                            verified=True, suite="karate", **extra))
    page, figure = str(tmp_path / "page.md"), str(tmp_path / "fig.png")
    assert write_page(db, suite, page=page, figure=figure) == [figure, page]
    db.close()
    text = open(page).read()
    assert "| 2.00x (1.82-2.22)ˢ |" in text and "1 sampled, `ˢ`" in text
    assert "ˢ GCN Karate partial: sampled, 50 cycles, 95% interval 45 to 55 (+-10.0%), 5.0% of windows" in text
    assert os.path.getsize(figure) > 10_000


def test_a_variant_runs_beside_the_schedules_and_is_listed_under_the_table(tmp_path):
    """`variants` add schedules to a case: their rows take ratios against the case's unfused row, the
    table keeps its columns (and its winner among them), and a line under it gives the variant."""
    suite = parse_suite('[suite]\nname = "v"\nschedules = ["unfused", "full"]\n[[case]]\nmodel = "gcn"\n'
                        'datasets = ["karate"]\nvariants = ["full order=reference"]\n', "v.toml")
    assert [t.schedule for t in suite.tasks()] == ["unfused", "full", "full order=reference"]
    path, page = str(tmp_path / "v.db"), str(tmp_path / "v.md")
    summary = run_suite(suite, path, executor="serial", progress=False)
    assert (summary.simulated, summary.failed) == (3, 0)
    db = SweepDB(path, readonly=True)
    rows = {r.schedule: r for r in suite_rows(db, suite)}
    write_page(db, suite, page=page)
    db.close()
    variant = rows["full order=reference"]
    assert variant.verified and variant.schedule_text == "full order=reference"
    assert variant.speedup == rows["unfused"].cycles / variant.cycles
    text = open(page).read()
    assert f"- GCN karate `full order=reference`: {variant.speedup:.2f}x (full: {rows['full'].speedup:.2f}x), " \
           f"{variant.cycles:,} cycles" in text
    table = [line for line in text.splitlines() if line.startswith("| GCN |")]
    assert len(table) == 1 and "order=reference" not in table[0]


FIGURE14 = """
[suite]
name = "f14"
schedules = ["unfused", "partial", "full"]
[[case]]
model = "gcn"
datasets = ["karate", "cora"]
variants = [{schedule = "layer1", label = "only layer 1 fused"}, {schedule = "layer2", label = "only layer 2 fused"}]
[[published_counts]]
model = "gcn"
dataset = "karate"
unfused = [1000, 2000]
full = [8000, 14000]
"only layer 1 fused" = [800, 1200]
layer2 = [1000, 2000]
partial = [800, 1200]
[[published_counts]]
model = "gcn"
dataset = "cora"
unfused = [500, 1000]
full = [4000, 7000]
"""


def _figure14_db(path: str) -> SweepDB:
    """Karate's unfused, partial, full (sampled) and layer1 rows (layer2 not run); nothing on cora."""
    db = SweepDB(path)
    db.start_session("f14", 10, 1, "serial", None)
    for schedule, flops, reads, writes, extra in (
            ("unfused", 100, 150, 50, {}), ("partial", 90, 100, 20, {}),
            ("full", 900, 1000, 400,
             {"mode": "sampled", "cycles_low": 90, "cycles_high": 110, "sampled_fraction": 0.05}),
            ("layer1", 95, 110, 30, {})):
        db.insert(ResultRow(schedule, program="model:gcn", data="dataset=karate", seed=0, model="gcn", dataset="karate",
                            label=schedule, cycles=100, flops=flops, mem_reads=reads, mem_writes=writes, kernels=1,
                            verified=True, suite="f14", **extra))
    return db


def test_figure14_section_sets_counts_over_unfused_beside_the_published(tmp_path):
    """The page's Figure-14 section: per case, each configuration's FLOPs and memory accesses over
    unfused beside the published ratios, how each row ran (a sampled one marked), "not run" for rows
    the database lacks, unfused's own counts beside the published ones; its chart goes beside
    Figure 12's, and the section after the suite's, before the page's next level-2 heading."""
    suite = parse_suite(FIGURE14, "f14.toml")
    db = _figure14_db(str(tmp_path / "f14.db"))
    page, figure = str(tmp_path / "results.md"), str(tmp_path / "figure12.png")
    with open(page, "w") as handle:
        handle.write("# Results\n\n<!-- suite f14 begin -->\nold\n<!-- suite f14 end -->\n### notes\n\nkept\n\n"
                     "## Later\n\nalso kept\n")
    figure14 = str(tmp_path / "figure14.png")
    assert write_page(db, suite, page=page, figure=figure) == [figure, figure14, page]
    db.close()
    assert os.path.getsize(figure14) > 10_000
    text = open(page).read()
    before, section = text.split("<!-- suite f14 figure14 begin -->\n")
    section, after = section.split("<!-- suite f14 figure14 end -->\n")
    assert before.endswith("### notes\n\nkept\n\n") and after == "## Later\n\nalso kept\n"
    assert section.startswith("## Figure 14") and "4 of the 7 rows it needs are in the database" in section
    lines = section.splitlines()
    karate = lines[lines.index("#### GCN karate") + 4:lines.index("#### GCN karate") + 8]
    assert karate == [
        "| full | 9.00xˢ | 8.00x | 7.00xˢ | 7.00x | sampled (`ˢ`): 5.0% of windows, cycles +-10.0% (95%), "
        "counts scaled from the sample |",
        "| only layer 1 fused (`layer1`) | 0.95x | 0.80x | 0.70x | 0.60x | whole, verified |",
        "| only layer 2 fused (`layer2`) | not run | 1.00x | not run | 1.00x | not run |",
        "| partial | 0.90x | 0.80x | 0.60x | 0.60x | whole, verified |"]
    assert "Unfused (whole, verified): 100 FLOPs and 200 memory accesses; published 1,000 and 2,000 " \
           "(ours 0.10x and 0.10x the published)." in section
    assert "| full | not run | 8.00x | not run | 7.00x | not run |" in section
    assert "Unfused: not run; published 500 FLOPs and 1,000 memory accesses." in section
    assert "![Figure 14: FLOPs against memory accesses over unfused, log-log](figure14.png)" in section
    # the variants' lines under the Figure-12 table name them by their labels
    assert "- GCN karate only layer 1 fused (`layer1`): 1.00x (full: 1.00x (0.91-1.11)ˢ), 100 cycles" in text
    # written again: the sections are replaced where they stand
    db = SweepDB(str(tmp_path / "f14.db"), readonly=True)
    write_page(db, suite, page=page)
    db.close()
    again = open(page).read()
    assert again.count("<!-- suite f14 figure14 begin -->") == 1 and "![Figure 14" not in again
    assert again.split("<!-- suite f14 figure14 end -->\n")[1] == after
    assert again.split("<!-- suite f14 figure14 begin -->")[0].endswith("### notes\n\nkept\n\n")


def test_figure14_chart_from_the_cli(tmp_path, capsys):
    suite_file = tmp_path / "f14.toml"
    suite_file.write_text(FIGURE14)
    path = str(tmp_path / "f14.db")
    _figure14_db(path).close()
    out = str(tmp_path / "f14.pdf")
    assert main(["plot", path, "--figure", "14", "--suite", str(suite_file), "-o", out]) == 0
    assert open(out, "rb").read(4) == b"%PDF"
    suite_file.write_text(KARATE)
    assert "suite karate has no published counts" in error_of(["plot", path, "--figure", "14", "--suite",
                                                               str(suite_file)], capsys)


def test_a_scalar_case_runs_the_blocked_models_presets_on_scalar_streams():
    """`tiled = false`: the presets keep their names, lose their tiles; the row says which it ran."""
    from fuseflow.studies.suite.run import run_suite_task  # noqa: PLC0415
    from fuseflow.studies.suite.spec import SuiteTask  # noqa: PLC0415

    tiled, scalar = build("gpt3-bigbird", "tiny", block=16), build("gpt3-bigbird", "tiny", block=16, tiled=False)
    assert scalar.presets["unfused"] == tiled.presets["unfused-unblocked"] == \
        tiled.presets["unfused"].replace(" block=16", "")
    assert not any(name.endswith("-unblocked") for name in scalar.presets)
    row = run_suite_task(SuiteTask("gpt3-bigbird", "tiny", "unfused", block=16, tiled=False).to_dict(),
                         post=lambda _message: None)
    assert row.status == "ok" and row.data == "dataset=tiny block=16 scalar", row
    assert "block=" not in row.schedule_text and row.verified
