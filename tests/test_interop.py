"""Comal and SAM exports of every test program, read back and checked against the graphs they came from.

Comal: the protobuf is parsed again; every node is one operation of the kind the mapping names;
every stream id is written once and read once, by fields of the same stream kind; following ids
(through broadcasts) connects exactly the producers and consumers the fuseflow graph connects;
every tensor file decodes to the data (inputs) or the numpy reference (expected outputs).
The SAM `.gv` export has its own tests (tests/test_samgv.py); here only the CLI writes both.
"""
from __future__ import annotations

import collections
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import fuseflow
from fuseflow import cli
from fuseflow.fusion.compile import compile_schedule
from fuseflow.interop import _values, emit_comal, read_tensor_files
from fuseflow.ir.formats import TensorFormat
from fuseflow.sam.comal import comal_name, stream_ids
from fuseflow.sam.comal_loader import check
from fuseflow.sam.comal_schema import message

MLIR = Path(__file__).parent / "mlir"
PROGRAMS = sorted(p.name for p in MLIR.glob("*.mlir"))
SHAPES = {"dynamic.mlir": {"A": (6, 8)}}  # a dynamic dimension needs data
COMAL_KIND = {"root": "root", "scan": "fiber_lookup", "locate": "locate", "repeat": "repeat", "intersect": "joiner",
              "union": "joiner", "array": "array", "alu": ("alu", "func"), "reduce": "reduce", "spacc": "spacc",
              "spacc2": "spacc", "crd_drop": "coord_drop", "level_write": "fiber_write", "value_write": "val_write",
              "fork": "fork", "join": "join", "repsig": "repeatsig"}


def _compiled(name: str, schedule: str):
    program = fuseflow.from_mlir(MLIR / name)
    data = fuseflow.random_inputs(program, density=0.3, seed=3, shapes=SHAPES.get(name))
    compiled = compile_schedule(program, schedule, {n: np.shape(v) for n, v in data.items()})
    return compiled, data


def _true(graph, stream):
    while graph.nodes[stream.node].kind == "broadcast":
        stream = graph.nodes[stream.node].inputs["in"]
    return stream


def _origin(graph, stream) -> int:
    """The node a stream comes from, through broadcasts and the lanes of a fork."""
    stream = _true(graph, stream)
    while graph.nodes[stream.node].kind == "fork":
        stream = _true(graph, graph.nodes[stream.node].inputs["in"])
    return stream.node


def _expected_edges(graph) -> collections.Counter:
    """(producer node, consumer node) per stream a Comal operation reads, broadcasts left out;
    a repeat's signal as ("signal", the node its repsig's coordinates come from)."""
    edges = collections.Counter()
    for node in graph.nodes:
        if node.kind in ("broadcast", "repsig"):
            continue
        for port, stream in node.inputs.items():
            source = _true(graph, stream)
            if (node.kind, port) == ("repeat", "sig"):
                edges[("signal", _origin(graph, graph.nodes[source.node].inputs["crd"]), f"n{node.id}")] += 1
            else:
                edges[(f"n{source.node}", f"n{node.id}")] += 1
    return edges


def _comal_edges(graph_message) -> tuple[collections.Counter, dict]:
    """(writer, reader) per id read, following broadcasts back to the writer; and the kind of field
    that wrote and read each id."""
    writer, kinds, reads = {}, collections.defaultdict(set), []
    ops = list(graph_message.operators)
    for op in ops:
        ins, outs = stream_ids(op)
        for i in outs:
            if i:
                assert i not in writer, f"stream id {i} is written twice ({writer.get(i)} and {op.name})"
                writer[i] = op
        reads += [(i, op) for i in ins]
    read_count = collections.Counter(i for i, _ in reads)
    assert all(read_count[i] == 1 for i in writer), "every written stream is read exactly once"
    assert all(i in writer for i, _ in reads), "every stream read is written (no id 0 on an input)"
    for op in ops:
        body = getattr(op, op.WhichOneof("op"))
        for fd, value in body.ListFields():
            for item in (value if fd.is_repeated else [value]):
                if getattr(item, "DESCRIPTOR", None) is not None and item.DESCRIPTOR.name.endswith("Stream"):
                    kinds[item.id.id].add((item.DESCRIPTOR.name, op.WhichOneof("op")))
    def chain_copy(op) -> bool:  # a broadcast inside the ALU chain of one node (`n7.a.copy`)
        return op.WhichOneof("op") == "broadcast" and op.name.endswith(".copy")

    def producer(i):
        source = writer[i]
        while source.WhichOneof("op") == "broadcast" and not chain_copy(source):
            source = writer[stream_ids(source)[0][0]]
        return source

    def node(op) -> str:  # the fuseflow node an operation stands for (`n7.2` is step 2 of n7's chain)
        return op.name.split(".")[0]

    edges = collections.Counter()
    for op in ops:
        if op.WhichOneof("op") == "broadcast" and not chain_copy(op):
            continue
        body = getattr(op, op.WhichOneof("op"))
        signal = None
        if op.WhichOneof("op") == "repeat":  # the stream Comal derives the repeat signal from
            signal = getattr(body, body.WhichOneof("input_rep_sig")).id.id
        for i in stream_ids(op)[0]:
            source = producer(i)
            if i == signal:
                while source.WhichOneof("op") == "fork":
                    source = producer(stream_ids(source)[0][0])
                edges[("signal", int(node(source)[1:]), node(op))] += 1
            elif node(source) != node(op):  # the steps of one chain feed each other
                edges[(node(source), node(op))] += 1
    return edges, kinds


PRESETS = ("unfused", "partial", "full", "full layout=induced")
CASES = [(name, schedule) for name in PROGRAMS for schedule in ("unfused", "full")] + [
    ("spmv.mlir", "full par=i:2"), ("matmul_chain.mlir", "full par=i:3"), ("softmax_sparse.mlir", "full par=i:2"),
    ("spmm_ikj.mlir", "full block=4")]  # fork/join lanes, tiles


@pytest.mark.parametrize("name, schedule", CASES)
def test_comal_round_trip(tmp_path, name, schedule):
    compiled, data = _compiled(name, schedule)
    manifest = emit_comal(compiled, data, str(tmp_path))
    values = _values(compiled, data)
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest
    for kernel in compiled.kernels:
        if kernel.is_reshape:
            continue
        graph, where = kernel.graph, tmp_path / f"k{kernel.index}"
        parsed = message("ComalGraph").FromString((where / "graph.bin").read_bytes())
        assert parsed.name == graph.name and parsed.channel_size == 1024
        by_name = {op.name: op for op in parsed.graph.operators}
        entry = manifest["kernels"][kernel.index]["entry"]  # none for 4x4 tiles: Comal's are 16, 32, 64
        assert entry == ("run_graph" if "block" not in schedule else None)
        loads = entry is not None and check(parsed, entry, str(where)).loads
        assert loads == manifest["kernels"][kernel.index]["loads"]
        for node in graph.nodes:  # one operation per primitive, of the mapped kind
            if node.kind == "broadcast" or (node.kind == "repsig" and f"n{node.id}" not in by_name):
                continue
            kind = by_name[f"n{node.id}"].WhichOneof("op")
            assert kind in np.atleast_1d(COMAL_KIND[node.kind]), (node.describe(), kind)
        edges, kinds = _comal_edges(parsed.graph)
        assert edges == _expected_edges(graph)
        for i, seen in kinds.items():  # written and read as the same kind of stream (func aside)
            if i and not any(op == "func" for _, op in seen):
                assert len({k for k, _ in seen}) == 1, (i, seen)
        notes = (where / "notes.txt").read_text().splitlines()
        funcs = [op.name for op in parsed.graph.operators if op.WhichOneof("op") == "func"]
        assert sorted(n.split()[0] for n in notes if "written as func" in n) == sorted(funcs)
        for stored, meta in graph.tensors.items():  # every tensor file holds the right data
            folder = where if meta.role == "input" else where / "expected"
            tensor = read_tensor_files(comal_name(stored), str(folder), TensorFormat.of(meta), meta.shape, meta.fill)
            want = values[meta.stores(stored)]
            assert np.allclose(tensor.to_dense(), np.reshape(want, meta.shape), equal_nan=True), stored
        for op in parsed.graph.operators:  # every tensor an operation reads has its files
            if op.WhichOneof("op") == "fiber_lookup":
                lookup = op.fiber_lookup
                assert (where / f"tensor_{lookup.tensor}_mode_shape").exists()
                if lookup.format == "compressed":
                    assert (where / f"tensor_{lookup.tensor}_mode_{lookup.mode}_crd").exists()
            if op.WhichOneof("op") == "array":
                assert (where / f"tensor_{op.array.tensor}_mode_vals").exists()
                assert (op.array.blocked, op.array.stream_shape) == ((True, 4) if "block=4" in schedule else (False, 0))


def test_comal_notes_name_what_has_no_equivalent(tmp_path):
    compiled, data = _compiled("softmax_sparse.mlir", "full")
    manifest = emit_comal(compiled, data, str(tmp_path))
    notes = manifest["kernels"][0]["notes"]
    # the max reduction's reset quirk; the coalesces of a background other than 0 read streams
    # that hold no Empty in Comal, so they pass the values on (a multiply by 1), and the graph loads
    assert any("reduce" in n and "restarts from 0" in n for n in notes)
    assert not any("func" in n for n in notes) and manifest["kernels"][0]["loads"]
    ops = [op for op in message("ComalGraph").FromString((tmp_path / "k0" / "graph.bin").read_bytes()).graph.operators]
    coalesces = [op for op in ops if op.WhichOneof("op") == "alu" and "coalesce" in op.alu.label]
    assert len(coalesces) == 2 and all(op.alu.scalar == 1.0 for op in coalesces)


def test_cli_emit_both_formats(tmp_path, capsys):
    comal, gv = tmp_path / "comal", tmp_path / "gv"
    assert cli.main(["compile", str(MLIR / "matmul_chain.mlir"), "--schedule", "unfused", "--emit", "comal",
                     str(comal), "--emit", "sam-gv", str(gv)]) == 0
    out = capsys.readouterr().out
    assert "wrote 2 Comal graphs" in out and "wrote 2 SAM graphs" in out
    assert sorted(os.listdir(gv)) == ["k0.gv", "k1.gv"]
    # the second kernel reads T, which the first writes: its file holds the reference's T
    manifest = json.loads((comal / "manifest.json").read_text())
    assert manifest["kernels"][1]["reads"]["T"] == "T" and manifest["kernels"][0]["writes"] == ["T"]
    assert cli.main(["compile", str(MLIR / "spmv.mlir"), "--emit", "protobuf", str(tmp_path / "x")]) == 2
    assert "unknown export format" in capsys.readouterr().err


# -- Comal's loader (a replay of its rules, sam/comal_loader.py) on every exported graph ----------
COMPARISONS = {"eq", "ne", "gt", "ge", "lt", "le", "select"}  # no Comal ALU op computes them, alone or chained


def _refused(compiled, data, where) -> list[tuple]:
    """(kernel, the graph node Comal refuses, why) for every kernel the loader would not take."""
    manifest = emit_comal(compiled, data, str(where))
    out = []
    for k in manifest["kernels"]:
        if k.get("refused"):
            graph = compiled.kernels[k["index"]].graph
            node = graph.nodes[int(k["refused"][0].split()[0][1:].split(".")[0])]
            out.append((k["index"], node, k["refused"][0]))
    return out


@pytest.mark.parametrize("name", PROGRAMS)
def test_comal_loader_takes_every_program(tmp_path, name):
    """Every kernel of every test program under every preset loads (tensor files included), except
    for the comparisons and selects of masked_softmax, which no Comal ALU computes."""
    for k, preset in enumerate(PRESETS):
        compiled, data = _compiled(name, preset)
        refused = _refused(compiled, data, tmp_path / str(k))
        assert all(node.kind == "alu" and "(func " in why and node.params["op"] in COMPARISONS
                   for i, node, why in refused), refused
        if name != "masked_softmax.mlir":
            assert not refused, (preset, refused)
    if name == "masked_softmax.mlir":
        assert refused


def _model_refusals(tmp_path, model, dataset, **kw):
    case = fuseflow.model(model, dataset=dataset, **kw)
    shapes = {n: np.shape(v) for n, v in case.inputs.items()}
    out = {}
    for k, (preset, schedule) in enumerate(case.presets.items()):
        if model == "gpt3-bigbird" and preset.startswith("full"):
            continue  # compiling GPT-3's cross-layer fusion takes minutes
        compiled = compile_schedule(case.program, schedule, shapes)
        out[preset] = _refused(compiled, case.inputs, tmp_path / str(k))
    return out


@pytest.mark.parametrize("model, dataset", [("gcn", "karate"), ("graphsage", "karate"), ("sae", "small")])
def test_comal_loader_takes_graph_models_whole(tmp_path, model, dataset):
    refused = _model_refusals(tmp_path, model, dataset)
    presets = {"unfused", "partial", "full"} | ({"layer1", "layer2"} if model != "sae" else set())
    assert set(refused) == presets and not any(refused.values()), refused


@pytest.mark.slow
def test_comal_loader_on_gpt3_names_what_keeps_each_kernel_out(tmp_path):
    """GPT-3 (tiny, 16x16 tiles): a kernel stays out only for the mask's comparison and select, or,
    in the true-block mode, for an ALU that mode lacks (exp, rsqrt, sigmoid) or a tensor of
    16-vectors (the mode reads every value as a 16x16 tile)."""
    refused = _model_refusals(tmp_path, "gpt3-bigbird", "tiny", block=16)
    for preset, kernels in refused.items():
        for _, node, why in kernels:
            tile_arm = "run_graph_true_block16" in why and any(op in why for op in ("EXP", "RSQRT", "SIGMOID"))
            vector = node.kind == "array" and "not whole 16x16 tiles" in why  # a tensor of 16-vectors
            assert tile_arm or vector or (node.params.get("op") in COMPARISONS and "(func " in why), (preset, why)
    assert refused["partial-unblocked"] and all("(func " in why for _, _, why in refused["partial-unblocked"])


def _op(graph, name, kind):
    op = graph.graph.operators.add(name=name)
    return getattr(op, kind)


def _stream(field, sid):
    field.id.id = sid
    return field


def test_comal_loader_replay_refuses_what_comal_refuses(tmp_path):
    from fuseflow.sam.comal_schema import enum_value
    graph_type = message("ComalGraph")

    def alu(op_name, inputs, entry="run_graph"):
        g = graph_type()
        body = _op(g, "n1", "alu")
        for k in range(inputs):
            _stream(body.vals.inputs.add(), 10 + k)
            _stream(_op(g, f"n{2 + k}", "reduce").output_val, 10 + k)  # the writers of the inputs
        body.stages.add(op=enum_value("ALU.ALUOp", op_name))
        _stream(body.vals.output, 0)
        return [str(r) for r in check(g, entry).rejections if r.op == "n1"]

    assert alu("MAX", 2)[0].startswith("n1 (alu MAX): no two-input MAX")
    assert alu("MAX", 1) == [] and alu("DIV", 2) == []
    assert "no one-input EXP in run_graph_true_block16" in alu("EXP", 1, "run_graph_true_block16")[0]
    assert "no two-input DIV" in alu("DIV", 2, "run_graph_true_block32")[0]
    # a repeat signal made by a repeatsig lands in the repsig map, the repeat reads the ref map
    g = graph_type()
    _stream(_op(g, "n1", "repeatsig").output_rep_sig, 5)
    repeat = _op(g, "n2", "repeat")
    _stream(repeat.rep_ref, 5)
    _stream(repeat.in_ref, 6)
    _stream(repeat.out_ref, 0)
    _stream(_op(g, "n3", "root").output_ref, 6)
    reasons = [r.reason for r in check(g).rejections]
    assert "repsig stream 5 is written but nothing reads it" in reasons
    assert "ref stream 5 is read but nothing writes it" in reasons
    # a scan reads its files; a compressed level's are numbered by the mode it names
    g = graph_type()
    scan = _op(g, "n1", "fiber_lookup")
    scan.tensor, scan.mode, scan.format = "A", 1, "compressed"
    (tmp_path / "tensor_A_mode_1_seg").write_text("0\n2\n")
    assert [r.reason for r in check(g, "run_graph", str(tmp_path)).rejections][-1].startswith(
        "reads tensor_A_mode_1_crd, which is missing")
    # two readers of one id, a read of id 0, func, and spacc order 2 where the block modes build order 1
    g = graph_type()
    _stream(_op(g, "n1", "root").output_ref, 3)
    _stream(_op(g, "n2", "fiber_write").input_crd, 0)
    _stream(_op(g, "n3", "array").input_ref, 3)
    _stream(_op(g, "n4", "array").input_ref, 3)
    _op(g, "n5", "func").name = "erf"
    reasons = [str(r) for r in check(g).rejections]
    assert any(r.startswith("n2 (fiber_write): reads crd stream id 0") for r in reasons)
    assert any(r.startswith("n4 (array): ref stream 3 has a second reader") for r in reasons)
    assert any(r.startswith("n5 (func erf): func: todo!()") for r in reasons)
    g = graph_type()
    spacc = _op(g, "n1", "spacc")
    spacc.order = 2
    for k, sid in enumerate((1, 2, 3)):
        _stream(spacc.input_inner_crd if k == 0 else spacc.input_outer_crds.add(), sid)
        _stream(_op(g, f"n{2 + k}", "fiber_lookup").output_crd, sid)
    _stream(spacc.output_outer_crds.add(), 0)
    assert [r.reason for r in check(g).rejections if "crd" in r.reason] == []
    block = [r.reason for r in check(g, "run_graph_block16").rejections]
    assert "crd stream 3 is written but nothing reads it" in block


def test_reference_numbered_csc_data_pairs_with_our_graph(tmp_path):
    """Tensor files written as the reference's tools write them, numbered by dimension, straight from
    scipy (a CSC matrix stores dimension 1 outermost: its compressed level holds dimension 0, so its
    arrays are `tensor_A_mode_0_seg/_crd`), load with our graph: every scan names a mode whose
    files are there, Comal's loader takes the pair, and our writer and reader agree with them."""
    import scipy.sparse as sp
    compiled, data = _compiled("transpose.mlir", "unfused")
    A = sp.random(6, 9, density=0.3, random_state=4, format="csc")
    data["A"] = A.toarray()
    reference = tmp_path / "reference"
    reference.mkdir()
    for suffix, numbers in (("shape", A.shape), ("0_seg", A.indptr), ("0_crd", A.indices), ("vals", A.data)):
        (reference / f"tensor_A_mode_{suffix}").write_text("".join(f"{x!r}\n" for x in np.asarray(numbers).tolist()))
    manifest = emit_comal(compiled, data, str(tmp_path / "ours"))
    kernel = next(k for k in manifest["kernels"] if "A" in k["reads"])
    ours = tmp_path / "ours" / kernel["data"]
    for name in os.listdir(reference):  # the same numbers under the same names
        assert np.allclose(np.loadtxt(reference / name, ndmin=1), np.loadtxt(ours / name, ndmin=1)), name
    parsed = message("ComalGraph").FromString((tmp_path / "ours" / kernel["graph"]).read_bytes())
    scans = [op.fiber_lookup for op in parsed.graph.operators if op.WhichOneof("op") == "fiber_lookup"
             and op.fiber_lookup.tensor == "A"]
    assert sorted((s.mode, s.format) for s in scans) == [(0, "compressed"), (1, "dense")]
    for other in os.listdir(ours):  # the kernel's other tensors, beside the reference's A
        if other.startswith("tensor_") and not other.startswith("tensor_A_"):
            shutil.copy(ours / other, reference / other)
    loaded = check(parsed, kernel["entry"], str(reference))
    assert loaded.loads, loaded.rejections
    assert {"tensor_A_mode_0_seg", "tensor_A_mode_0_crd", "tensor_A_mode_shape"} <= loaded.files
    meta = compiled.kernels[kernel["index"]].graph.tensors["A"]
    back = read_tensor_files("A", str(reference), TensorFormat.of(meta), meta.shape)
    assert np.array_equal(back.to_dense(), A.toarray())
