"""Schedules on the command line: `study --schedule` (repeatable, any string), `--schedules` for
presets, the `fuseflow help schedules` topic (every example compiles for its model), and
`orders` marking the default order with each order's estimated cost."""
from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

import fuseflow
from fuseflow.cli import main
from fuseflow.cmdline.topics import TOPICS, topic_text

MLIR = Path(__file__).parent / "mlir"


def test_study_takes_custom_groupings(capsys):
    # the grouping that `--schedules` used to split at its commas
    assert main(["study", "fusion", "--model", "gcn", "--dataset", "karate", "--schedule", "unfused",
                 "--schedule", "fusion=[t2,t5][t6,t7,t8]", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["schedule"] for r in rows] == ["unfused", "fusion=[t2,t5][t6,t7,t8]"]
    assert rows[1]["verified"] is True and rows[1]["kernels"] == 9  # [t2,t5], [t6,t7,t8] and 7 alone


def test_schedules_is_for_preset_names(capsys):
    assert main(["study", "fusion", "--model", "gcn", "--schedules", "fusion=[t2,t5][t6,t7,t8]"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--schedule S (repeatable)" in err and "'fusion=[t2'" in err


def test_one_statement_models_say_partial_is_full(tmp_path, capsys):
    path = tmp_path / "one.py"
    path.write_text(textwrap.dedent("""
        import torch
        class One(torch.nn.Module):
            def forward(self, A, X):
                return torch.relu(A @ X) * 2.0
    """))
    assert main(["study", "fusion", f"{path}:One", "--input", "6x6:csr", "--input", "6x3"]) == 0
    assert "partial and full are the same schedule on this model" in capsys.readouterr().out


def test_help_topics_print(capsys):
    for topic in TOPICS:
        assert main(["help", topic]) == 0
        assert capsys.readouterr().out.strip() == topic_text(topic)
    assert main(["help", "compile"]) == 0
    assert "--svg" in capsys.readouterr().out
    assert main(["help", "nothing"]) == 2
    assert "topics: schedules, models, datasets" in capsys.readouterr().err


def test_the_schedule_topic_covers_the_grammar():
    text = topic_text("schedules")
    for item in ("unfused", "partial", "full", "fusion=[a,b][c]", "order=i,k,j", "order.1=#2", "order=reference",
                 "format.T=", ";order=1,0", "layout=induced", "layout=declared", "par=i:4", "par.1=i:4,j:2",
                 "block=16"):
        assert item in text, item


def test_the_op_naming_example_is_what_inspect_prints(capsys):
    assert main(["inspect", "--model", "gcn"]) == 0
    printed = {line.strip() for line in capsys.readouterr().out.splitlines()}
    shown = [line.strip() for line in topic_text("schedules").splitlines() if line.strip().startswith("gcn.py:")]
    assert len(shown) == 2 and all(line in printed for line in shown)


def topic_examples() -> list[tuple[str, str]]:
    """(model, schedule) of every example line of the topic's per-model section."""
    section = topic_text("schedules").split("EXAMPLES PER MODEL")[1]
    examples, model = [], None
    for line in section.splitlines():
        header = re.match(r"  ([a-z0-9-]+) ?.*:$", line)
        if header:
            model = header.group(1)
        elif line.startswith("    ") and model:
            examples.append((model, re.split(r"\s{3,}", line.strip())[0]))
    return examples


def test_the_topic_has_examples_for_every_model():
    assert {m for m, _ in topic_examples()} == set(fuseflow.MODELS)


@pytest.mark.slow
@pytest.mark.parametrize("model, schedule", topic_examples())
def test_every_topic_example_compiles(model, schedule):
    case = fuseflow.model(model)
    compiled = fuseflow.compile(case.program, case.presets.get(schedule, schedule), data=case.inputs)
    assert compiled.kernels


def orders_output(argv, capsys) -> list[tuple[str, float, str]]:
    assert main(["orders", *argv]) == 0
    return [(m.group(1), float(m.group(2)), m.group(3)) for m in
            re.finditer(r"#\d+ (\S+)\s+cost (\S+)\s*(<- \w+)?", capsys.readouterr().out)]


def test_orders_marks_the_cheapest_as_default(capsys):
    listed = orders_output([str(MLIR / "matmul_chain.mlir"), "--schedule", "full layout=induced"], capsys)
    marked = [(order, cost) for order, cost, mark in listed if mark == "<- default"]
    assert len(marked) == 1 and marked[0][1] == min(cost for _, cost, _ in listed)
    compiled = fuseflow.compile(fuseflow.from_mlir(MLIR / "matmul_chain.mlir"), "full layout=induced")
    assert marked[0][0] == ",".join(compiled.kernels[0].order)


def test_orders_marks_a_given_order(capsys):
    listed = orders_output([str(MLIR / "matmul_chain.mlir"), "--schedule", "full layout=induced order=#2"], capsys)
    assert [mark for _, _, mark in listed].count("<- given") == 1 and listed[2][2] == "<- given"


def test_orders_with_data_weighs_by_densities(capsys):
    assert main(["orders", "--model", "gcn", "--schedule", "partial"]) == 0
    out = capsys.readouterr().out
    assert out.count("weighed by the data's densities") == 2 and out.count("<- default") == 2


def _parsed_texts(monkeypatch) -> list:
    """The texts `Schedule.parse` reads from now on (a list that fills as they are parsed)."""
    from fuseflow.schedule.schedule import Schedule

    texts = []
    parse = Schedule.parse

    def counted(text):
        texts.append(text)
        return parse(text)

    monkeypatch.setattr(Schedule, "parse", staticmethod(counted))
    return texts


@pytest.mark.parametrize("argv", [
    ["simulate", str(MLIR / "spmm_ikj.mlir"), "--schedule", "full order=i,k,j par=i:2", "--json"],
    ["compile", str(MLIR / "spmm_ikj.mlir"), "--schedule", "full order=i,k,j par=i:2"],
    ["simulate", "--model", "gcn", "--dataset", "karate", "--schedule", "partial", "--json"],
])
def test_a_command_parses_its_schedule_once(argv, monkeypatch, capsys):
    """The schedule is read into its `Schedule` record at the edge and passed down as that record:
    neither the checks, the API nor the compiler read its text again."""
    texts = _parsed_texts(monkeypatch)
    assert main(argv) == 0, capsys.readouterr().err
    assert len(texts) == 1, texts


def test_a_study_parses_each_of_its_schedules_once(monkeypatch, capsys):
    """`study fusion` reads each schedule it names once (the command's check, the study and its
    same-schedule notes share the record)."""
    texts = _parsed_texts(monkeypatch)
    argv = ["study", "fusion", "--model", "gcn", "--dataset", "karate", "--schedules", "unfused,full layout=induced",
            "--schedule", "fusion=[t2,t5][t6,t7,t8]", "--json"]
    assert main(argv) == 0, capsys.readouterr().err
    assert len(texts) == 3 and len(set(texts)) == 3, texts


@pytest.mark.slow
def test_a_sweep_reads_each_granularity_once_for_all_its_order_variants(monkeypatch):
    """`orders="all"` varies one group's order at a time on the granularity's record: its text is
    read once, not once per variant (issue #28)."""
    from fuseflow.studies.space import DataPoint, ProgramRef, load, order_variants

    loaded = load(ProgramRef.parse(str(MLIR / "matmul_chain.mlir")), DataPoint(density=0.2))
    texts = _parsed_texts(monkeypatch)
    variants = list(order_variants(loaded, "full layout=induced"))
    assert len(variants) > 3 and all(not isinstance(c, Exception) for _, c in variants)
    assert texts == ["full layout=induced"]
    from fuseflow.schedule.schedule import Schedule

    assert [str(c.schedule) for _, c in variants] == [str(Schedule.parse(v)) for v, _ in variants]
