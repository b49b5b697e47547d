"""The SAM `.gv` export in the form SAM's simulator runs (sam/samgv, sam/samform), checked without SAM.

Structure: accumulators are fed point streams made by CrdHold (order 1: the output level above,
held over the reduced loop, then over the level below; order 2: the outer output level held over
the inner one), and the outer output level is written from the accumulator; every output level
is written compressed; tensors carry SAM's one-letter names. Refusals: what SAM cannot run raises
`NotInSam` with a one-line reason, and `--emit sam-gv` exits 2 with it. Every kernel of every test
program either passes the replay of SAM's generator (sam/samgv_check) or is refused; Graphviz
reads every file back to the same nodes and edges. (bench/sam_export_check.py runs the generated
tests in SAM itself, by hand.)
"""
from __future__ import annotations

import collections
import json
import shutil
import subprocess
from pathlib import Path

import pytest

import fuseflow
from fuseflow import cli
from fuseflow.fusion.compile import compile_schedule
from fuseflow.interop import emit_sam_gv
from fuseflow.sam.samform import GvEdge, GvNode, GvTensor, NotInSam, SamGv, simulator_form
from fuseflow.sam.samgv import records, render, to_samgv
from fuseflow.sam.samgv_check import check_samgv, generator_walk_problem, loaded_modes, parse_gv

MLIR = Path(__file__).parent / "mlir"
PROGRAMS = sorted(p.name for p in MLIR.glob("*.mlir"))
PRESETS = ("unfused", "partial", "full", "full layout=induced")
SHAPES = {"dynamic.mlir": {"A": (6, 8)}}


def _kernels(name: str, schedule: str):
    program = fuseflow.from_mlir(MLIR / name)
    shapes = SHAPES.get(name)
    return [k for k in compile_schedule(program, schedule, shapes).kernels if not k.is_reshape]


def _info(attrs: dict) -> dict:
    return dict(x.split("=") for x in attrs["comment"].split(","))


def _parsed(name: str, schedule: str = "full"):
    return parse_gv(to_samgv(_kernels(name, schedule)[0].graph))


def _into(gv, node: str) -> list[tuple[str, dict]]:
    return [(s, a) for s, d, a in gv.edges if d == node]


def _past_broadcasts(gv, node: str) -> str:
    while gv.nodes[node]["type"] == "broadcast":
        node = _into(gv, node)[0][0]
    return node


def _of_type(gv, kind: str) -> dict[str, dict]:
    return {n: _info(a) for n, a in gv.nodes.items() if _info(a)["type"] == kind}


def test_order1_accumulator_reads_held_points_and_writes_the_outer_level():
    """SpMM in i,k,j order: Y[i,j] += A[i,k] X[k,j] reduces k between output levels i and j."""
    gv = _parsed("spmm_ikj.mlir")
    (acc, info), = _of_type(gv, "spaccumulator").items()
    holds = _of_type(gv, "crdhold")
    assert info["order"] == "1" and len(holds) == 2
    inputs = {a["label"]: s for s, a in _into(gv, acc)}
    outer_var, inner_var = info["in1"], info["in0"]
    assert set(inputs) == {f"crd_outer-{outer_var}", f"crd_inner-{inner_var}", "val"}
    last = inputs[f"crd_outer-{outer_var}"]
    assert inputs[f"crd_inner-{inner_var}"] == last and holds[last] == {"type": "crdhold", "outer": outer_var,
                                                                         "inner": inner_var}
    (first, how), = {s: a for s, a in _into(gv, last) if a["label"] == f"crd_outer-{outer_var}"}.items()
    reduced = holds[first]["inner"]
    assert holds[first]["outer"] == outer_var and reduced not in (outer_var, inner_var)
    # the first hold reads the outer level's scan and the reduced loop's coordinates
    sources = {a["label"]: gv.nodes[_past_broadcasts(gv, s)] for s, a in _into(gv, first)}
    assert sources[f"crd-{outer_var}"]["index"] == outer_var and sources[f"crd-{reduced}"]["index"] == reduced
    # both output levels are written from the accumulator, compressed
    writers = {a["mode"]: n for n, a in _of_type(gv, "fiberwrite").items() if a["mode"] != "vals"}
    assert {_past_broadcasts(gv, s) for w in writers.values() for s, _ in _into(gv, w)} == {acc}
    assert all(_of_type(gv, "fiberwrite")[w]["format"] == "compressed" for w in writers.values())
    assert gv.comment.split(",")[0] == "X=ss01"


def test_order2_accumulator_reads_one_hold_of_its_two_output_levels():
    """SpMM in j,i,k order reduces the outermost loop into two output levels: one CrdHold."""
    gv = _parsed("spmm_jik.mlir")
    (acc, info), = _of_type(gv, "spaccumulator").items()
    (hold, how), = _of_type(gv, "crdhold").items()
    assert info["order"] == "2" and how["outer"] == info["in1"] and how["inner"] == info["in0"]
    assert sorted(a["label"] for _, a in _into(gv, acc)) == \
        sorted([f"crd_outer-{info['in1']}", f"crd_inner-{info['in0']}", "val"])
    written = {a["label"] for s, d, a in gv.edges if s == acc and a["type"] == "crd"}
    assert written == {f"crd-{info['in0']}", f"crd-{info['in1']}"}


def test_tensors_get_sams_one_letter_names():
    """The output is X (x for a vector); an input called X is renamed; `names` maps them back."""
    text = to_samgv(_kernels("spmm_ikj.mlir", "full")[0].graph)
    names = dict(x.split("=") for x in text.splitlines()[2].split('"')[1].split())
    assert names["X"] == "Y" and names["B"] == "X" and names["A"] == "A"
    gv = parse_gv(text)
    assert {_info(a).get("tensor") for a in gv.nodes.values()} - {None} <= set(names)
    assert check_samgv(text) is None


def _spacc_records(levels: int, level_of_inner: int) -> SamGv:
    """An order-1 accumulator over loop r writing level `level_of_inner` of an output with `levels`
    levels, the others written from scan 0 (loop i)."""
    out = GvTensor("X", "s" * levels, "".join(str(k) for k in range(levels)), "output", "Y")
    gv = SamGv([out], {0: GvNode(0, "fiberlookup", {"index": "i", "tensor": "B", "mode": "0", "format": "dense"}, ""),
                       1: GvNode(1, "spaccumulator", {"order": "1", "in0": "j", "in1": "r"}, "")})
    gv.edges = [GvEdge(0, 1, "crd", "crd_inner-j"), GvEdge(0, 1, "crd", "crd_outer-r")]
    for level in range(levels):
        gv.nodes[2 + level] = GvNode(2 + level, "fiberwrite", {"index": "?", "tensor": "X", "mode": str(level)}, "")
        inner = level == level_of_inner
        gv.edges.append(GvEdge(1 if inner else 0, 2 + level, "crd", "crd-j" if inner else "crd-i"))
    return gv


def test_accumulators_sam_cannot_hold_are_refused():
    with pytest.raises(NotInSam, match="reduced loop r, and here that loop is outermost"):
        simulator_form(_spacc_records(1, 0))
    with pytest.raises(NotInSam, match="two output levels; this one sits under 3"):
        simulator_form(_spacc_records(3, 2))
    held = simulator_form(_spacc_records(2, 1))
    assert sorted((n.attrs["outer"], n.attrs["inner"]) for n in held.nodes.values() if n.type == "crdhold") == \
        [("i", "j"), ("i", "r")]
    assert {(e.src, e.label) for e in held.edges if e.dst == 2} == {(1, "crd-i")}


@pytest.mark.parametrize("node, why", [
    (GvNode(0, "exp", {}, ""), "SAM has no exp"),
    (GvNode(0, "add", {"sub": "1"}, ""), "no subtraction"),
    (GvNode(0, "mul", {"const0": "2"}, ""), "no scalar operand"),
    (GvNode(0, "reduce", {"kind": "max"}, ""), "only sums"),
    (GvNode(0, "arrayvals", {"tensor": "B", "fill": "1"}, ""), "read 0 where"),
    (GvNode(0, "fork", {"lanes": "2"}, ""), "parallel lanes"),
    (GvNode(0, "fiberlookup", {"index": "i", "tensor": ""}, ""), "runs over no stored tensor"),
])
def test_what_sam_lacks_is_refused_with_the_reason(node, why):
    with pytest.raises(NotInSam, match=why):
        simulator_form(SamGv([GvTensor("X", "s", "0", "output", "Y")], {0: node}))


def test_two_outputs_are_refused():
    with pytest.raises(NotInSam, match="SAM's generated test writes one output"):
        records(_kernels("transpose.mlir", "full")[0].graph)


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_kernel_is_written_for_sams_generator_or_refused(name):
    """The replay of SAM's generator takes every graph written; what is not written says why."""
    for preset in PRESETS:
        for kernel in _kernels(name, preset):
            try:
                text = to_samgv(kernel.graph)
            except NotInSam as why:
                assert str(why) and "\n" not in str(why)
                continue
            assert check_samgv(text) is None
            info = [_info(a) for a in parse_gv(text).nodes.values()]
            assert all(a["format"] == "compressed" for a in info if a["type"] == "fiberwrite" and a["mode"] != "vals")


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="Graphviz's dot is not installed (scripts/setup.sh installs it)")
@pytest.mark.parametrize("name", ["spmm_ikj.mlir", "spmm_jik.mlir", "spmv.mlir", "matmul_chain.mlir"])
def test_graphviz_reads_the_file_back(tmp_path, name):
    for k, kernel in enumerate(_kernels(name, "unfused")):
        text = to_samgv(kernel.graph)
        path = tmp_path / f"k{k}.gv"
        path.write_text(text)
        parsed = json.loads(subprocess.run(["dot", "-Tjson", str(path)], check=True, capture_output=True,
                                           text=True).stdout)
        gv = parse_gv(text)
        assert {o["name"] for o in parsed["objects"]} == set(gv.nodes)
        gvid = {o["_gvid"]: o["name"] for o in parsed["objects"]}
        edges = collections.Counter((gvid[e["tail"]], gvid[e["head"]], e["label"]) for e in parsed.get("edges", []))
        assert edges == collections.Counter((s, d, a["label"]) for s, d, a in gv.edges)


def test_emit_writes_what_sam_runs_and_refuses_the_rest(tmp_path, capsys):
    compiled = compile_schedule(fuseflow.from_mlir(MLIR / "masked_softmax.mlir"), "unfused")
    export = emit_sam_gv(compiled, str(tmp_path))
    assert export.refused and export.paths and len(export.paths) + len(export.refused) == len(compiled.kernels)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(Path(p).name for p in export.paths)
    assert cli.main(["compile", str(MLIR / "spmm_ikj.mlir"), "--emit", "sam-gv", str(tmp_path / "a")]) == 0
    assert "wrote 1 SAM graph" in capsys.readouterr().out
    assert cli.main(["compile", str(MLIR / "gelu.mlir"), "--emit", "sam-gv", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot run k0: SAM's generated test has no scalar operand (mul 0.5)" in err
    assert not (tmp_path / "b" / "k0.gv").exists()


def test_dense_levels_below_another_are_read_as_compressed_levels_of_every_coordinate():
    """SAM's dense scanner fails on an empty fiber of references: only root scans stay dense."""
    gv = _parsed("spmm_ikj.mlir")
    formats = dict(x.split("=") for x in gv.comment.split(","))
    assert formats["A"] == "ds01" and formats["B"] == "ss01"  # B is the program's dense X
    scans = _of_type(gv, "fiberlookup").values()
    assert {(a["tensor"], a["format"]) for a in scans if a["root"] == "true"} == {("A", "dense")}
    assert {a["format"] for a in scans if a["root"] == "false"} == {"compressed"}


def test_the_generator_walk_replay_finds_a_stale_add_index_that_another_order_avoids():
    """Z = T + Y: declared in id order, SAM's generator writes the add right after the union
    (stale index 3); `to_samgv` declares the add's inputs first, and the add is written at the
    start of the generator's next pass."""
    kernel = _kernels("shared_filter.mlir", "unfused")[2]
    gv = simulator_form(records(kernel.graph))
    assert "stale index (3)" in generator_walk_problem(parse_gv(render(gv)))
    assert check_samgv(to_samgv(kernel.graph)) is None


def test_the_level_files_sams_test_loads():
    assert loaded_modes("ds01") == {1} and loaded_modes("ss10") == {0, 1} and loaded_modes("dds021") == {2}
    text = ('digraph SAM {\n    comment="X=s0,B=dds021"\n'
            '    1 [comment="type=fiberlookup,index=j,tensor=B,mode=1,format=compressed,src=true,root=false"]\n'
            '    2 [comment="type=fiberwrite,index=j,tensor=X,mode=0,format=compressed,segsize=2,crdsize=2,'
            'sink=true"]\n}')
    assert check_samgv(text).endswith("(dds021) as modes [2], not mode 1")
