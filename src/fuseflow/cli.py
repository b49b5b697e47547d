"""The `fuseflow` command.

    fuseflow inspect model.mlir [--json] [--format A=compressed,compressed]
    fuseflow inspect --torch models.py:GCN --input 34x34:csr --input 34x34 [--init '{"features": 34}']
    fuseflow compile model.mlir --schedule "full order=i,k,j" [--table] [-o graph.json] [--svg graph.svg]
    fuseflow orders model.mlir [--schedule unfused] [--group 1]
    fuseflow study fusion --model gcn --dataset karate [--plot out.png]
    fuseflow sweep ... --db results.sqlite   /   fuseflow plot results.sqlite
    fuseflow gpu plan --chain G5 [--topk 11] [--json]
    fuseflow gpu bench
    fuseflow demo

Bad input prints one line `fuseflow: error: ...` and exits with status 2.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from functools import partial

import numpy as np

from .data.inputs import read_inputs
from .demo import run_demo
from .errors import FuseflowError, UserError
from .explore.cli import add_commands as add_explore_commands
from .frontend import from_mlir
from .frontend.torch_loader import program_from_torch_spec
from .fusion.compile import compile_schedule
from .fusion.listing import order_listing
from .gpu.cli import add_commands as add_gpu_commands
from .interop import emit
from .ir.canonicalize import prepare
from .ir.generate import random_inputs
from .pipeline import simulate
from .report.html import compile_report
from .report.overview import render_overview
from .sam.draw import render
from .schedule.schedule import statement_groups
from .sim.hw import HwConfig
from .simreport import simulate_report
from .study import MAX_TOKENS, format_table, fusion_study, plot


def _parse_formats(items: list[str] | None) -> dict:
    formats = {}
    for item in items or []:
        name, sep, fmt = item.partition("=")
        if not sep or not name or not fmt:
            raise UserError(f"--format {item!r} is not NAME=LEVELS", "command line",
                            "write e.g. --format A=dense,compressed")
        formats[name] = fmt
    return formats


def _cmd_inspect(args) -> int:
    if args.torch:
        program = program_from_torch_spec(args.torch, args.input, args.init, args.density, args.seed,
                                          _parse_formats(args.format))
    else:
        if not args.file:
            raise UserError("inspect needs an MLIR file or --torch FILE.py:Class", "command line")
        program = from_mlir(args.file, func=args.func, formats=_parse_formats(args.format))
    if args.json:
        print(program.to_json_text())
    else:
        print(program)
    return 0


def _load_program(args):
    return from_mlir(args.file, func=args.func, formats=_parse_formats(args.format))


def _cmd_compile(args) -> int:
    compiled = compile_schedule(_load_program(args), args.schedule)
    if args.schedule is None:
        print(f"schedule: {compiled.schedule} (the default)")
    graphs = [k.graph for k in compiled.kernels if k.graph is not None]
    for kernel in compiled.kernels:
        if kernel.graph is None:
            print(f"kernel {kernel.index}: reshape {kernel.group[0]} (a view, no graph)")
            continue
        counts = {}
        for node in kernel.graph.nodes:
            counts[node.kind] = counts.get(node.kind, 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        print(f"kernel {kernel.index}: ops {','.join(kernel.group)}  order {','.join(kernel.order)}  "
              f"{len(kernel.graph.nodes)} nodes ({summary})")
        if args.table:
            print(kernel.table.dump())
        if args.text:
            print(kernel.graph.to_text())
    if args.output:
        data = {"schedule": str(compiled.schedule), "kernels": [g.to_json() for g in graphs]}
        with open(args.output, "w") as handle:
            json.dump(data if len(graphs) != 1 else graphs[0].to_json(), handle, indent=1)
        print(f"wrote {args.output}")
    if args.svg:
        for k, graph in enumerate(graphs):
            path = args.svg if len(graphs) == 1 else args.svg.replace(".", f".k{k}.", 1)
            print(f"wrote {render(graph, path)}")
    _compile_extras(args, compiled)
    return 0


def _compile_extras(args, compiled) -> None:
    """--overview, --html and --emit of `fuseflow compile`."""
    if args.overview:
        print(f"wrote {render_overview(compiled, args.overview)}")
    if args.html:
        print(f"wrote {compile_report(compiled, args.html)}")
    for fmt, directory in args.emit or []:
        print(emit(compiled, fmt, directory, _emit_data(args, compiled.program) if fmt == "comal" else {}))


def _emit_data(args, program) -> dict:
    given = _read_inputs(args.inputs, program)
    shapes = {n: v.shape for n, v in given.items()}
    return {**random_inputs(program, density=args.density, seed=args.seed, shapes=shapes), **given}


def _cmd_orders(args) -> int:
    compiled = compile_schedule(_load_program(args), args.schedule)
    for kernel in compiled.kernels:
        region = kernel.listed_region()
        if region is None or (args.group is not None and kernel.index != args.group):
            continue
        region.stats = kernel.region.stats  # costs weighed as the compiler weighed them
        mark = "given" if kernel.index in compiled.schedule.orders else "default"
        for line in order_listing(region, f"group {kernel.index} ({','.join(kernel.group)})", args.limit,
                                  args.verbose, kernel.order, mark, "; cost = estimated loop work"):
            print(line, flush=True)
    return 0


def _read_inputs(path: str | None, program) -> dict:
    """Inputs from an .npz keyed arg0, arg1, ... in argument order (or by input name)."""
    return read_inputs(path, program, "--inputs") if path else {}


def _cmd_simulate(args) -> int:
    program = _load_program(args)
    hw = HwConfig(hbm=args.hbm, channel_depth=args.depth)
    run = simulate
    if args.html:  # the report is written also when the simulation fails; then the error is raised
        run = partial(simulate_report, path=args.html, on_written=lambda p: print(f"wrote {p}", file=sys.stderr))
    result = run(program, args.schedule, _read_inputs(args.inputs, program), seed=args.seed,
                      density=args.density, hw=hw, engine=args.engine)
    if args.save_outputs:
        np.savez(args.save_outputs, **{f"out{k}": result.outputs[n] for k, n in enumerate(program.outputs)})
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
        return 0
    print(f"program {result.program}  schedule: {result.schedule}")
    print(f"{'kernel':<28} {'order':<14} {'cycles':>12} {'flops':>10} {'reads':>10} {'writes':>10} "
          f"{'tokens':>11} {'max fifo':>8}")
    for k in result.kernels:
        print(f"{k.name[:28]:<28} {','.join(k.order)[:14]:<14} {k.cycles:>12,} {k.flops:>10,} {k.mem_reads:>10,} "
              f"{k.mem_writes:>10,} {k.tokens:>11,} {k.max_occupancy:>8,}")
    print(f"{'total':<43} {result.cycles:>12,} {result.flops:>10,} {result.mem_reads:>10,} "
          f"{result.mem_writes:>10,} {result.tokens:>11,} {result.max_occupancy:>8,}")
    print(f"outputs verified against the numpy reference (max abs error {result.max_abs_error:.2e}); "
          f"{result.wall_seconds:.2f} s")
    return 0


def _study_case(args):
    from .models.registry import MODELS, build  # noqa: PLC0415 - models load torch (slow); only model studies need them

    if args.model in MODELS:
        return build(args.model, args.dataset, scale=args.scale, seed=args.seed, block=args.block)
    from .models.presets import as_schedule, reference_unfused  # noqa: PLC0415 - models load torch (slow); only model studies need them
    from .models.registry import ModelCase  # noqa: PLC0415 - models load torch (slow); only model studies need them
    if args.model.endswith(".mlir"):
        program = from_mlir(args.model)
    elif ":" in args.model:
        program = program_from_torch_spec(args.model, args.input, None, args.density, args.seed, {})
    else:
        raise UserError(f"unknown model {args.model!r}", "--model",
                        f"use one of {', '.join(MODELS)}, a .mlir file or FILE.py:Class")
    program = prepare(program)
    case = ModelCase(program.name, "generated", program, random_inputs(program, density=args.density, seed=args.seed))
    case.presets = {"unfused": as_schedule(reference_unfused(program)),
                    "partial": as_schedule(statement_groups(program)), "full": "full layout=induced"}
    return case


def _cmd_study(args) -> int:
    case = _study_case(args)
    schedules = [s.strip() for s in args.schedules.split(",") if s.strip()]
    rows = fusion_study(case, schedules, engine=args.engine, progress=not args.json, max_tokens=args.max_tokens)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"fusion study: {case.name} on {case.dataset}" + (f" ({case.note})" if case.note else ""))
        print(format_table(rows))
    if args.plot:
        print(f"wrote {plot(rows, args.plot)}", file=sys.stderr)
    return 0


def _cmd_demo(args) -> int:
    return run_demo(seed=args.seed)


def _add_study_command(sub) -> None:
    """`fuseflow study fusion`: simulate fusion granularities of a model."""
    p = sub.add_parser("study", help="studies over schedules: `study fusion` compares granularities")
    studies = p.add_subparsers(dest="study", required=True)
    p = studies.add_parser("fusion", help="simulate unfused, partial and full fusion of a model")
    p.add_argument("--model", default="gcn", help="gcn, graphsage, sae, gpt3-bigbird, a .mlir file or FILE.py:Class")
    p.add_argument("--dataset", help="graph (karate, cora, cora_ml, synthetic:dblp, a .npz), sae size "
                   "(small, imagenet, ...) or gpt3 config (tiny, small)")
    p.add_argument("--schedules", default="unfused,partial,full", help="presets or schedule strings, comma-separated")
    p.add_argument("--scale", type=float, default=1.0, help="size factor for synthetic graphs")
    p.add_argument("--block", type=int, default=16,
                   help="BigBird block size; gpt3-bigbird presets run blocked with tiles of this size")
    p.add_argument("--input", action="append", metavar="SHAPE[:LAYOUT]", help="inputs of a FILE.py:Class model")
    p.add_argument("--density", type=float, default=0.1, help="density of generated sparse inputs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--engine", choices=["fast", "oracle"], default="fast")
    p.add_argument("--json", action="store_true")
    p.add_argument("--plot", metavar="OUT.png", help="grouped bar chart of the ratios")
    p.add_argument("--max-tokens", type=float, default=MAX_TOKENS, metavar="N",
                   help="estimate, not simulate, schedules the heuristic puts above N token events "
                        f"(default {MAX_TOKENS:.0e}, about five minutes of simulation)")
    p.set_defaults(run=_cmd_study)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fuseflow", description=__doc__.split("\n")[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inspect", help="print the tensor program of an MLIR file or PyTorch model")
    p.add_argument("file", nargs="?", help="an .mlir file (linalg + sparse_tensor)")
    p.add_argument("--func", help="function to import when the module has several")
    p.add_argument("--torch", metavar="FILE.py:CLASS", help="import a PyTorch module class instead")
    p.add_argument("--input", action="append", metavar="SHAPE[:LAYOUT]",
                   help="example input for --torch, in forward() order, e.g. 34x34:csr (layouts: "
                        "dense, csr, csc, coo, bsrB); default: the file's example_inputs()")
    p.add_argument("--init", metavar="JSON", help="keyword arguments for the model constructor")
    p.add_argument("--format", action="append", metavar="NAME=LEVELS",
                   help="declare an input's storage, e.g. W=compressed,compressed (repeatable)")
    p.add_argument("--density", type=float, default=0.1, help="density of generated sparse inputs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=_cmd_inspect)

    def mlir_command(name, help_text, run):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("file", help="an .mlir file (linalg + sparse_tensor)")
        p.add_argument("--func", help="function to import when the module has several")
        p.add_argument("--format", action="append", metavar="NAME=LEVELS", help="declare an input's storage")
        p.add_argument("--schedule", help='e.g. "unfused", "full order=i,k,j", '
                       '"fusion=[t1,t2][t3] order.1=#2 layout=induced" (default: the first of full, '
                       '"full layout=induced", unfused, "unfused layout=induced" that compiles)')
        p.set_defaults(run=run)
        return p

    p = mlir_command("compile", "lower a schedule to dataflow graphs", _cmd_compile)
    p.add_argument("--table", action="store_true", help="print each group's fusion table")
    p.add_argument("--text", action="store_true", help="print each graph as text")
    p.add_argument("-o", "--output", help="write the graph(s) as JSON")
    p.add_argument("--svg", help="draw the graph(s) (needs Graphviz)")
    p.add_argument("--overview", metavar="OUT.svg", help="draw the kernels and the tensors between them")
    p.add_argument("--html", metavar="OUT.html", help="write an interactive report (one self-contained file)")
    p.add_argument("--emit", nargs=2, action="append", metavar=("FORMAT", "DIR"),
                   help="write the graphs for the reference tools: comal (protobuf graphs with the tensor "
                        "files Comal reads) or sam-gv (SAM's .gv graphs); repeatable")
    p.add_argument("--inputs", help="data for --emit comal, as .npz keyed arg0, arg1, ... (missing ones are generated)")
    p.add_argument("--seed", type=int, default=0, help="seed for generated inputs (--emit comal)")
    p.add_argument("--density", type=float, default=0.1, help="density of generated sparse inputs (--emit comal)")
    p = mlir_command("simulate", "simulate a schedule cycle by cycle and verify its outputs", _cmd_simulate)
    p.add_argument("--inputs", help="dense inputs as .npz keyed arg0, arg1, ... (missing ones are generated)")
    p.add_argument("--save-outputs", metavar="OUT.npz", help="save the outputs keyed out0, out1, ...")
    p.add_argument("--seed", type=int, default=0, help="seed for generated inputs")
    p.add_argument("--density", type=float, default=0.1, help="density of generated sparse inputs")
    p.add_argument("--hbm", action="store_true", help="model memory channels for scans, arrays and writers")
    p.add_argument("--depth", type=int, help="bound every channel to this many tokens (detects deadlock)")
    p.add_argument("--engine", choices=["fast", "oracle"], default="fast")
    p.add_argument("--json", action="store_true", help="machine-readable result")
    p.add_argument("--html", metavar="OUT.html", help="also write an interactive report (one self-contained file), "
                   "even when the simulation deadlocks or fails verification")
    p = mlir_command("orders", "count and list the valid dataflow orders of each group (as order.N=#k names them)",
                     _cmd_orders)
    p.add_argument("--group", type=int, help="only this group")
    p.add_argument("--limit", type=int, default=50, metavar="N", help="list at most N orders per group (0: all)")
    p.add_argument("-v", "--verbose", action="store_true", help="also list unsupported orders and why")

    _add_study_command(sub)

    add_explore_commands(sub)

    add_gpu_commands(sub)

    p = sub.add_parser("demo", help="import the built-in GCN on the karate club and check the reference")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except FuseflowError as err:
        print(f"fuseflow: error: {err.one_line()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fuseflow: interrupted (a sweep resumes when rerun with the same arguments)", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as err:  # an internal bug: one line unless --debug
        if args.debug:
            raise
        print(f"fuseflow: internal error: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
              " (rerun with --debug for the traceback and please report it)", file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
