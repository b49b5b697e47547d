"""Comal and SAM exports of every test program, read back and checked against the graphs they came from.

Comal: the protobuf is parsed again; every node is one operation of the kind the mapping names;
every stream id is written once and read once, by fields of the same stream kind; following ids
(through broadcasts) connects exactly the producers and consumers the fuseflow graph connects;
every tensor file decodes to the data (inputs) or the numpy reference (expected outputs).
SAM: the `.gv` text is parsed by Graphviz (`dot -Tjson`) and its nodes and edges are compared with
the graph's.
"""
from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import fuseflow
from fuseflow import cli
from fuseflow.fusion.compile import compile_schedule
from fuseflow.interop import _values, emit_comal, emit_sam_gv, read_tensor_files
from fuseflow.ir.formats import TensorFormat
from fuseflow.sam.comal import comal_name, stream_ids
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
    def producer(i):
        source = writer[i]
        while source.WhichOneof("op") == "broadcast":
            source = writer[stream_ids(source)[0][0]]
        return source

    edges = collections.Counter()
    for op in ops:
        if op.WhichOneof("op") == "broadcast":
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
                edges[("signal", int(source.name[1:]), op.name)] += 1
            else:
                edges[(source.name, op.name)] += 1
    return edges, kinds


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
    # the max reduction's reset quirk, and the two coalesces of a background other than 0
    assert any("reduce" in n and "restarts from 0" in n for n in notes)
    assert sum("coalesce" in n and "func" in n for n in notes) == 2


def _gv(path: Path) -> dict:
    out = subprocess.run(["dot", "-Tjson", str(path)], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="Graphviz's dot is not installed (scripts/setup.sh installs it)")
@pytest.mark.parametrize("name", PROGRAMS)
def test_sam_gv_round_trip(tmp_path, name):
    compiled, _ = _compiled(name, "full")
    paths = emit_sam_gv(compiled, str(tmp_path))
    graphs = [k.graph for k in compiled.kernels if not k.is_reshape]
    assert len(paths) == len(graphs)
    for path, graph in zip(paths, graphs):
        parsed = _gv(Path(path))
        nodes = {int(o["name"]): o for o in parsed["objects"]}
        gvid = {o["_gvid"]: int(o["name"]) for o in parsed["objects"]}
        dropped = {n.id for n in graph.nodes if n.kind == "root" or (n.kind == "broadcast" and
                   graph.nodes[n.inputs["in"].node].kind == "root")}
        assert set(nodes) == {n.id for n in graph.nodes} - dropped
        for node in graph.nodes:
            if node.id in nodes and node.kind == "scan":
                attrs = nodes[node.id]
                assert attrs["type"] == "fiberlookup" and attrs["index"] == node.var
                assert attrs["root"] == str(graph.nodes[_true(graph, node.inputs["ref"]).node].kind == "root").lower()
        edges = collections.Counter((gvid[e["tail"]], gvid[e["head"]], e["type"]) for e in parsed.get("edges", []))
        want = collections.Counter((s.node, n.id, graph.stream_kind(s)) for n in graph.nodes if n.id not in dropped
                                   for s in n.inputs.values() if s.node not in dropped)
        assert edges == want


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
