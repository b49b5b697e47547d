"""`fuseflow compile MODEL`: a schedule lowered to dataflow graphs, printed, written as JSON, drawn,
reported as HTML, or emitted for the reference tools.

    fuseflow compile tests/mlir/spmm_ikj.mlir --schedule "full order=i,k,j" [--table] [-o g.json] [--svg g.svg]
    fuseflow compile --model gcn --schedule full --ops gcn.pdf      # one box per source op, for a paper's column
"""
from __future__ import annotations

import json

from .. import api
from ..files import atomic_path, check_output, kernel_paths, write_text
from ..interop import emit
from ..report.html import compile_report
from ..report.overview import render_overview
from ..sam.draw import render
from ..sam.opview import render_op_view
from .args import budget_of
from .source import load_source


def data_if_given(source, args):
    """All inputs when the user gave data (a model's dataset, --inputs), else None: compile and
    orders then weigh default orders by the data, as simulate does."""
    return source.data(args.density, args.seed, budget_of(args)) if source.given else None


def compile_source(source, args):
    """The command's model compiled with its schedule (the default where none is given)."""
    return api.compile(source.program, source.schedule(args.schedule), shapes=source.input_shapes(),
                       data=data_if_given(source, args))


def _print_kernels(compiled, args) -> None:
    for kernel in compiled.kernels:
        if kernel.graph is None:
            print(f"kernel {kernel.index}: reshape {kernel.group[0]} (a view, no graph)")
            continue
        counts: dict[str, int] = {}
        for node in kernel.graph.nodes:
            counts[node.kind] = counts.get(node.kind, 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        print(f"kernel {kernel.index}: ops {','.join(kernel.group)}  order {','.join(kernel.order)}  "
              f"{len(kernel.graph.nodes)} nodes ({summary})")
        if args.table:
            print(kernel.table.dump())
        if args.text:
            print(kernel.graph.to_text())


def _write_pictures(graphs, path: str, flag: str, draw) -> None:
    for target, graph in zip(kernel_paths(path, len(graphs)), graphs):
        with atomic_path(target, flag) as temp:
            draw(graph, temp)
        print(f"wrote {target}")


PICTURES = (".svg", ".png", ".pdf")


def run(args) -> int:
    for path, flag, suffixes in ((args.output, "-o", ()), (args.svg, "--svg", PICTURES), (args.ops, "--ops", PICTURES),
                                 (args.overview, "--overview", ()), (args.html, "--html", ())):
        if path:
            check_output(path, flag, suffixes)
    source = load_source(args, budget_of(args))
    compiled = compile_source(source, args)
    if args.schedule is None:
        print(f"schedule: {compiled.schedule} (the default)")
    _print_kernels(compiled, args)
    graphs = [k.graph for k in compiled.kernels if k.graph is not None]
    if args.output:
        data = {"schedule": str(compiled.schedule), "kernels": [g.to_json() for g in graphs]}
        write_text(args.output, json.dumps(data if len(graphs) != 1 else graphs[0].to_json(), indent=1), "-o")
        print(f"wrote {args.output}")
    if args.svg:
        _write_pictures(graphs, args.svg, "--svg", render)
    if args.ops:
        _write_pictures(graphs, args.ops, "--ops", render_op_view)
    _compile_extras(args, compiled, source)
    return 0


def _compile_extras(args, compiled, source) -> None:
    """--overview, --html and --emit of `fuseflow compile`."""
    for path, flag, write in ((args.overview, "--overview", render_overview), (args.html, "--html", compile_report)):
        if path:
            with atomic_path(path, flag) as temp:
                write(compiled, temp)
            print(f"wrote {path}")
    for fmt, directory in args.emit or []:
        data = source.data(args.density, args.seed, budget_of(args)) if fmt == "comal" else {}
        print(emit(compiled, fmt, directory, data))
