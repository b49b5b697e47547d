"""Pictures: graph labels and layout choices, the overview of kernels, notebook display, study and sweep charts."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import fuseflow
from fuseflow import cli
from fuseflow.fusion.compile import compile_schedule
from fuseflow.models.registry import build
from fuseflow.pipeline import simulate
from fuseflow.report.overview import kernel_io, overview_dot
from fuseflow.sam.draw import edge_label, fit_scale, for_column, hidden, svg, text_points, to_dot, write_picture
from fuseflow.sam.labels import node_label
from fuseflow.sam.opview import column_view, drawn_ops, op_edges, op_view_dot, primitive_counts
from fuseflow.studies.granularity import StudyTable, fusion_study
from fuseflow.studies.plot import bar_labels, study_figure
from fuseflow.studies.row import ResultRow

MLIR = Path(__file__).parent / "mlir"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def _graph(name="softmax_sparse.mlir", schedule="full"):
    return compile_schedule(fuseflow.from_mlir(MLIR / name), schedule).kernels[0].graph


def test_labels_name_primitive_variable_tensor_mode_and_format():
    graph = _graph("matmul_chain.mlir")
    labels = {n.id: node_label(graph, n) for n in graph.nodes}
    for node in graph.nodes:
        if node.kind == "scan" and node.params["tensor"]:
            meta = graph.tensors[node.params["tensor"]]
            want = meta.mode_order[node.params["level"]]
            assert (labels[node.id].var, labels[node.id].mode, labels[node.id].format) == \
                (node.var, want, node.params["format"])
        if node.kind == "repeat":  # the variable it repeats along is the one its signal's coordinates carry
            assert labels[node.id].var in "ijkl" and labels[node.id].var
        if node.kind == "level_write":
            assert labels[node.id].var and labels[node.id].tensor == "O"


def test_compact_picture_keeps_what_informs():
    graph = _graph()
    dot = to_dot(graph, rankdir="TB")
    left_out = hidden(graph)
    kinds = {graph.nodes[n].kind for n in left_out}
    assert kinds <= {"broadcast", "repsig", "root"}
    for node in graph.nodes:
        drawn = re.search(rf"\bn{node.id} \[", dot) is not None
        assert drawn == (node.id not in left_out), node.describe()
    # joiners show their index variable (the text form's `union [k]`)
    for node in graph.nodes:
        if node.kind in ("union", "intersect"):
            assert f"<b>{node.kind} {node.label}</b>" in dot
    # one box per source op, labelled with its statement; the legend names every stream kind
    for op, statement in graph.ops.items():
        if any(n.op == op and n.id not in left_out for n in graph.nodes):
            assert statement in dot
    assert all(f"{kind}: " in dot for kind in ("crd", "ref", "val", "repsig"))
    full = to_dot(graph, rankdir="TB", compact=False)
    assert all(re.search(rf"\bn{n.id} \[", full) for n in graph.nodes)


@needs_dot
def test_deep_graphs_wrap_into_columns_joined_by_connectors():
    case = build("gcn", "karate")
    graph = compile_schedule(case.program, case.presets["full"]).kernels[0].graph
    one, two = (svg(graph, rankdir="TB", columns=k) for k in (1, 2))
    assert fit_scale(two) > 1.3 * fit_scale(one)  # the fully fused GCN is deep: two columns show it larger
    # every edge between the columns becomes a pair of connectors naming the nodes at each end
    dot = to_dot(graph, rankdir="TB", columns=2)
    outs = re.findall(r'(to_\d+_1_\w+) \[.*?label="to ([^"]+)"', dot)
    assert outs and all(re.search(rf"\bfrom_{o[3:]} \[", dot) for o, _ in outs)
    assert max(fit_scale(svg(graph)), 0) >= fit_scale(two)  # the chosen layout is at least as large


def test_overview_shows_kernels_and_the_tensors_between_them():
    compiled = compile_schedule(fuseflow.from_mlir(MLIR / "softmax_sparse.mlir"), "unfused")
    dot = overview_dot(compiled)
    for kernel in compiled.kernels:
        reads, writes = kernel_io(compiled, kernel)
        assert f"k{kernel.index} [" in dot
        assert all(f"t_{t} -> k{kernel.index};" in dot for t in reads)
        assert all(f"k{kernel.index} -> t_{t};" in dot for t in writes)
    assert "order " in dot and "nodes" in dot


@needs_dot
def test_notebook_display():
    program = fuseflow.from_mlir(MLIR / "matmul_chain.mlir")
    graph = compile_schedule(program, "full").kernels[0].graph
    assert graph._repr_svg_().lstrip().startswith("<?xml") and "scan i" in graph._repr_svg_()
    unfused = compile_schedule(program, "unfused")
    page = unfused._repr_html_()
    assert "<svg" in page and ">k1</td>" in page and "kernel 1" in page  # the overview and the table
    result = simulate(program, "unfused", seed=2)
    page = result._repr_html_()
    assert f"{result.cycles:,} cycles" in page and "outputs verified" in page
    assert page.count("<tr>") == len(result.kernels) + 2  # header, one row per kernel, total


def test_study_table_and_chart(tmp_path):
    rows = fusion_study(build("gcn", "karate"), ["unfused", "partial"], engine="fast")
    assert isinstance(rows, StudyTable) and isinstance(rows, list)
    page = rows._repr_html_()
    assert ">partial</td>" in page and f">{rows[1].speedup:.2f}x</td>" in page
    figure = study_figure(rows)
    speed, ratios = figure.axes
    assert "higher is better" in speed.get_title() and "lower is better" in ratios.get_title()
    labels = [t.get_text() for t in speed.texts]
    assert labels == [f"{r.speedup:.2f}x" for r in rows]  # each bar says its value
    assert len(ratios.texts) == 2 * len(rows)
    path = rows.plot(str(tmp_path / "study.png"))
    assert Path(path).stat().st_size > 10_000


def test_sweep_bars_are_named_by_granularity_and_order():
    rows = [ResultRow("fusion=[t1][t2] layout=induced order.0=i,j order.1=j,i", label="partial"),
            ResultRow("fusion=[t1,t2] layout=induced"),
            ResultRow("full layout=induced", label="full"),
            ResultRow("full layout=induced format.T=dense,dense", label="full")]
    names = bar_labels(rows)
    assert names[0] == "partial  0:i,j 1:j,i" and names[1] == "fusion=[t1,t2] +ind"
    assert names[2] != names[3] and names[2].startswith("full")  # the same label: told apart by schedule


@needs_dot
def test_cli_pictures(tmp_path, capsys):
    out = tmp_path / "g.svg"
    assert cli.main(["compile", str(MLIR / "softmax_sparse.mlir"), "--schedule", "unfused", "--svg", str(out),
                     "--overview", str(tmp_path / "over.png"), "--html", str(tmp_path / "r.html")]) == 0
    text = capsys.readouterr().out
    assert "wrote" in text and (tmp_path / "over.png").stat().st_size > 5000
    assert (tmp_path / "g.k0.svg").read_text().count('class="node"') > 3
    assert (tmp_path / "r.html").read_text().count('class="pane"') == 9  # the overview; 4 kernels, 2 pictures each
    assert cli.main(["compile", str(MLIR / "spmv.mlir"), "--overview", str(tmp_path / "x.gif")]) == 2
    assert "cannot draw to" in capsys.readouterr().err


def test_reports_link_the_nodes_an_error_names():
    from fuseflow.report.html import _linked
    from fuseflow.report.runs import Problem

    compiled = compile_schedule(fuseflow.from_mlir(MLIR / "matmul_chain.mlir"), "unfused")
    writers = [n.id for n in compiled.kernels[1].graph.nodes if n.kind in ("level_write", "value_write")]
    text = _linked(Problem("simulated O differs from the reference at (1, 2): 3 vs 4", None, "mismatch"), compiled)
    assert "written in kernel 1 by" in text
    assert all(f'data-kernel="1" data-node="{w}">n{w}</a>' in text for w in writers)
    text = _linked(Problem("deadlock at cycle 9: n4 repsig waits for data on crd; full channels: n2.crd (depth 1)",
                           0, "deadlock"), compiled)
    assert text.count('class="node-link" data-kernel="0"') == 2 and ">n2</a>.crd" in text


def test_edges_say_their_kind_in_words_and_line_style():
    graph = _graph("matmul_chain.mlir")
    dot = to_dot(graph, rankdir="TB")
    labels = re.findall(r'-> \S+ \[([^\]]*)\]', dot)
    assert labels and all('label="' in attrs for attrs in labels)  # every edge says what it carries
    for node in graph.nodes:
        for stream in node.inputs.values():
            kind = graph.stream_kind(stream)
            words = edge_label(graph, stream, kind)
            assert words.split()[0] == {"crd": "crd", "ref": "ref", "val": "val", "repsig": "sig"}[kind]
            if graph.nodes[stream.node].kind == "scan" and kind == "crd":
                assert words == f"crd {graph.nodes[stream.node].var}"
    for kind, style in (("ref", "dashed"), ("repsig", "dotted")):  # not told apart by colour alone
        assert re.search(rf'style="{style}"[^\]]*tooltip="{kind}: ', dot)
    assert re.search(r'penwidth="2.2"[^\]]*tooltip="val: ', dot)


@needs_dot
def test_compact_view_has_one_box_per_source_op_and_stays_legible_in_a_column(tmp_path):
    case = build("gcn", "karate")
    graph = compile_schedule(case.program, case.presets["full"]).kernels[0].graph
    dot = op_view_dot(graph)
    assert len(re.findall(r"\bop_\w+ \[id=", dot)) == len(graph.ops) == len(drawn_ops(graph))
    for op in graph.ops:  # each box: its statement and its primitive count
        total = sum(primitive_counts(graph, op).values())
        assert f"{total} primitive" in dot.split(f"op_{op} [", 1)[1].split("];", 1)[0]
    assert sum(sum(primitive_counts(graph, op).values()) for op in graph.ops) <= len(graph.nodes)
    edges = op_edges(graph)
    values = {(s, t) for s, t, e in edges if e.kind == "val"}
    assert ("t2", "t5") in values and ("t23", "t24") in values  # t5 reads t2's values; t24 divides by t23
    assert all(e.words.startswith(("val ", "crd ")) for _, _, e in edges)
    dot, picture = column_view(graph)
    assert text_points(picture) >= 7  # at 8.5 cm wide, no text under 7 points
    assert cli.main(["compile", "--model", "gcn", "--dataset", "karate", "--schedule", "full",
                     "--ops", str(tmp_path / "ops.pdf")]) == 0
    for suffix, magic in (("pdf", b"%PDF"), ("svg", b"<?xml"), ("png", b"\x89PNG")):
        path = tmp_path / f"ops.{suffix}"
        if suffix != "pdf":  # what render_op_view writes, from the layout chosen above
            write_picture(for_column(dot), str(path))
        assert path.read_bytes().startswith(magic)


def test_figure12_at_column_width_with_readable_labels_and_notes(tmp_path):
    from fuseflow.studies.plot import COLUMN_IN, figure12, figure12_chart
    from fuseflow.studies.suite.spec import ChartNote

    rows = [ResultRow(s, model=m, dataset=d, speedup=v, estimated_ratios=s == e)
            for m, d, e, speeds in (("sae", "small", "", (1.0, 1.02, 2.0)), ("gcn", "cora", "full", (1.0, 1.67, 0.26)),
                                    ("gcn", "collab", "", (1.0, 1.58, 0.012)))
            for s, v in zip(("unfused", "partial", "full"), speeds)]
    published = {("sae", "small", None): {"unfused": 100, "partial": 100, "full": 150},  # the winner differs
                 ("gcn", "cora", None): {"unfused": 49, "partial": 30, "full": 166}}
    notes = [ChartNote(("gcn",), "Collab is synthetic.", ("collab",))]
    figure = figure12(rows, published, {("gcn", "cora"): "Cora"}, notes=notes)
    assert abs(figure.get_size_inches()[0] - COLUMN_IN) < 1e-6  # drawn at its printed size
    texts = [t for ax in figure.axes for t in ax.texts] + figure.texts
    values = [t.get_text() for ax in figure.axes for t in ax.texts]
    assert values == ["1.02", "2.00", "1.67", "1.58", "~0.26", "0.012"]  # every bar says its value
    assert all(t.get_rotation() == 0 and t.get_fontsize() >= 6.5 for t in texts)  # level and readable
    ticks = [t.get_text() for ax in figure.axes for t in ax.get_yticklabels()]
    assert ticks == ["small*", "Cora", "collab¹"]  # a note's number; * where the winner differs unexplained
    below = figure.texts[-1].get_text()
    assert "¹ Collab is synthetic." in below and "* the winner differs from the published one" in below
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend == ["partially fused", "fully fused", "published", "~ heuristic"]
    for suffix, magic in (("pdf", b"%PDF"), ("png", b"\x89PNG"), ("svg", b"<?xml")):  # the same code, each format
        path = figure12_chart(rows, str(tmp_path / f"f12.{suffix}"), published=published, notes=notes)
        assert open(path, "rb").read(5).startswith(magic[:5])


def test_figure12_rows_read_back_from_the_results_page():
    from fuseflow.studies.suite.recorded import recorded_rows
    from fuseflow.studies.suite.spec import load_suite

    suite = load_suite("figure12")
    page = (Path(__file__).parent.parent / "docs" / "results.md").read_text()
    rows, labels = recorded_rows(page, suite)
    cases = {(r.model, r.dataset, r.block) for r in rows}
    ran = int(re.search(r"on \d{4}-\d\d-\d\d: (\d+) of \d+ tasks", page).group(1))
    listed = page.split("Variants beside the table's schedules", 1)[1].split("\n\n")[1] if "Variants beside" in page \
        else ""
    variants = [line for line in listed.splitlines() if line.startswith("- ")]  # listed under the table, where they ran
    # every case it ran: 3 tasks each, and the variants the page lists
    assert cases <= {(t.model, t.dataset, t.block) for t in suite.tasks()} and 3 * len(cases) + len(variants) == ran
    assert all(r.speedup == 1.0 for r in rows if r.schedule == "unfused")
    # estimated rows: only where sampling cannot reach
    assert any(not r.estimated_ratios for r in rows if r.speedup is not None)


@needs_dot
def test_overview_for_a_column_names_inputs_in_boxes_and_stays_legible():
    from fuseflow.report.overview import column_overview_dot
    from fuseflow.sam.draw import best_layout

    case = build("gcn", "karate")
    compiled = compile_schedule(case.program, case.presets["unfused"])
    dot = column_overview_dot(compiled)
    assert all(f"k{k.index} [" in dot for k in compiled.kernels)
    assert "reads A, X" in dot and 'label="t2 34×34"' in dot  # an input in its box, an intermediate on its edge
    assert text_points(best_layout([dot])[1]) >= 7  # printed within 8.5 cm by 9 inches
