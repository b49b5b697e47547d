"""The `fuseflow` command.

    fuseflow inspect MODEL [--json]                       a Program in index notation
    fuseflow orders MODEL [--schedule S] [--group N]      valid dataflow orders, default and cost
    fuseflow compile MODEL --schedule S [--table] [-o graph.json] [--svg graph.svg]
    fuseflow simulate MODEL --schedule S [--inputs data.npz] [--json]
    fuseflow study fusion MODEL [--schedule S ...] [--plot out.png]
    fuseflow study suite [figure12 | FILE.toml] --db suite.db [--scheduler ADDR] [--page results.md]
    fuseflow sweep ... --db results.sqlite   /   fuseflow plot results.sqlite
    fuseflow gpu plan --chain G5 [--topk 11] [--json]   /   fuseflow gpu bench
    fuseflow help [schedules | datasets | models | COMMAND]   /   fuseflow demo

MODEL is an .mlir file, FILE.py:Class (or --torch FILE.py:Class --input ...), or a built-in model
(model:gcn, or --model gcn --dataset cora); see `fuseflow help models`.

Bad input prints one line `fuseflow: error: ...` and exits with status 2; an internal error
(exit status 3) is a bug in fuseflow.
"""
from __future__ import annotations

import json
import linecache
import os
import sys

import numpy as np

from . import __version__, api
from .checks import check_schedule
from .cmdline.args import Parser, count, positive, positive_real, size
from .cmdline.progress import RunProgress, numba_notice
from .cmdline.quiet import quiet
from .cmdline.source import add_source_arguments, load_source
from .cmdline.suite import add_figure_option, add_suite_command
from .cmdline.sweep import add_commands as add_sweep_commands
from .cmdline.topics import TOPICS, topic_text
from .demo import run_demo
from .errors import FuseflowError, UserError
from .files import atomic_path, check_output, kernel_paths, temporary_beside, write_text
from .fusion.listing import order_listing
from .gpu.cli import add_commands as add_gpu_commands
from .interop import emit
from .ir.program import op_output
from .memory import Budget
from .report.html import compile_report
from .report.overview import render_overview
from .sam.draw import render
from .schedule.schedule import Schedule
from .sim.hw import HwConfig
from .simreport import simulate_report
from .studies.granularity import MAX_TOKENS


def _budget(args):
    return Budget(args.max_memory) if args.max_memory else None


def _data_if_given(source, args):
    """All inputs when the user gave data (a model's dataset, --inputs), else None: compile and
    orders then weigh default orders by the data, as simulate does."""
    return source.data(args.density, args.seed, _budget(args)) if source.given else None


def _compile(source, args):
    return api.compile(source.program, source.schedule(args.schedule), shapes=source.input_shapes(),
                           data=_data_if_given(source, args))


# -- inspect -------------------------------------------------------------------------------------
def _ops_by_line(program) -> list[str]:
    """Op names (as schedules use them) grouped by the source line that made them, with the
    line's text where the file can be read."""
    lines: dict[tuple[str, int], list[str]] = {}
    for op in program.ops:
        path, _, rest = (op.loc or "?").partition(":")
        number = rest.split(":")[0]
        lines.setdefault((path, int(number) if number.isdigit() else 0), []).append(op_output(op))
    rows = [(f"{os.path.basename(path)}:{number}:" if number else f"{path}:", " ".join(names),
             linecache.getline(path, number).strip() if number else "") for (path, number), names in lines.items()]
    width = min(48, max(len(where) + 1 + len(names) for where, names, _ in rows))
    return [f"  {f'{where} {names}':<{width}}   {text}".rstrip() for where, names, text in rows]


def _cmd_inspect(args) -> int:
    source = load_source(args, _budget(args))
    if args.json:
        print(source.program.to_json_text())
        return 0
    print(source.program)
    print("ops by source line (schedules name an op by the tensor it writes; `partial` groups each line):")
    print("\n".join(_ops_by_line(source.canonical())))
    return 0


# -- compile -------------------------------------------------------------------------------------
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


def _write_svgs(graphs, path: str) -> None:
    for target, graph in zip(kernel_paths(path, len(graphs)), graphs):
        with atomic_path(target, "--svg") as temp:
            render(graph, temp)
        print(f"wrote {target}")


PICTURES = (".svg", ".png", ".pdf")


def _cmd_compile(args) -> int:
    for path, flag, suffixes in ((args.output, "-o", ()), (args.svg, "--svg", PICTURES),
                                 (args.overview, "--overview", ()), (args.html, "--html", ())):
        if path:
            check_output(path, flag, suffixes)
    source = load_source(args, _budget(args))
    compiled = _compile(source, args)
    if args.schedule is None:
        print(f"schedule: {compiled.schedule} (the default)")
    _print_kernels(compiled, args)
    graphs = [k.graph for k in compiled.kernels if k.graph is not None]
    if args.output:
        data = {"schedule": str(compiled.schedule), "kernels": [g.to_json() for g in graphs]}
        write_text(args.output, json.dumps(data if len(graphs) != 1 else graphs[0].to_json(), indent=1), "-o")
        print(f"wrote {args.output}")
    if args.svg:
        _write_svgs(graphs, args.svg)
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
        data = source.data(args.density, args.seed, _budget(args)) if fmt == "comal" else {}
        print(emit(compiled, fmt, directory, data))


# -- orders --------------------------------------------------------------------------------------
def _cmd_orders(args) -> int:
    compiled = _compile(load_source(args, _budget(args)), args)
    weighed = "weighed by the data's densities" if compiled.kernels and any(
        k.region is not None and k.region.stats is not None for k in compiled.kernels) else "by sizes alone"
    for kernel in compiled.kernels:
        region = kernel.listed_region()
        if region is None or (args.group is not None and kernel.index != args.group):
            continue
        region.stats = kernel.region.stats  # costs weighed as the compiler weighed them
        mark = "given" if kernel.index in compiled.schedule.orders else "default"
        for line in order_listing(region, f"group {kernel.index} ({','.join(kernel.group)})", args.limit,
                                  args.verbose, kernel.order, mark, f"; cost = estimated loop work, {weighed}"):
            print(line, flush=True)
    return 0


# -- simulate ------------------------------------------------------------------------------------
def _save_outputs(path: str, program, result) -> None:
    with atomic_path(path, "--save-outputs") as temp:
        with open(temp, "wb") as handle:
            np.savez(handle, **{f"out{k}": result.outputs[n] for k, n in enumerate(program.outputs)})
    print(f"wrote {path}", file=sys.stderr)


def _print_result(result) -> None:
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


def _simulate_with_report(source, args, data, hw):
    """`simulate_report`: the HTML report is written (atomically) also when the simulation fails,
    then the failure is raised."""
    check_schedule(source.program, source.schedule(args.schedule), source.input_shapes())
    temp = temporary_beside(args.html, "--html")

    def written(path: str) -> None:
        os.replace(path, args.html)
        print(f"wrote {args.html}", file=sys.stderr)

    try:
        return simulate_report(source.program, source.schedule(args.schedule), data, path=temp, seed=args.seed,
                               density=args.density, hw=hw, engine=args.engine, on_written=written)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def _cmd_simulate(args) -> int:
    for path, flag, suffixes in ((args.save_outputs, "--save-outputs", (".npz",)), (args.html, "--html", ())):
        if path:
            check_output(path, flag, suffixes)
    budget = _budget(args)
    source = load_source(args, budget)
    data = source.data(args.density, args.seed, budget)
    hw = HwConfig(hbm=args.hbm, channel_depth=args.depth)
    label = f"{source.program.name} {args.schedule or '(default schedule)'}"
    with RunProgress(label, enabled=None if not args.json else False) as bar, \
            numba_notice():
        if args.html:
            result = _simulate_with_report(source, args, data, hw)
        else:
            result = api.simulate(source.program, source.schedule(args.schedule), data, seed=args.seed,
                                  density=args.density, hw=hw, engine=args.engine, budget=budget,
                                  on_kernel=bar.on_kernel, on_events=bar.on_events)
    if args.save_outputs:
        _save_outputs(args.save_outputs, source.program, result)
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        _print_result(result)
    return 0


# -- study ---------------------------------------------------------------------------------------
def _study_schedules(args, source) -> list[str]:
    names = list(args.schedule or [])
    if args.schedules or not names:
        for item in (args.schedules or "unfused,partial,full").split(","):
            item = item.strip()
            if not item:
                continue
            if item not in source.presets:
                try:
                    Schedule.parse(item)
                except UserError:
                    raise UserError(f"--schedules {item!r} is not a preset of {source.label} "
                                    f"({', '.join(source.presets)})", "--schedules",
                                    "give schedule strings with --schedule S (repeatable), e.g. "
                                    "--schedule 'fusion=[t2,t5][t6,t7,t8]'") from None
            names.append(item)
    return names


def _cmd_study(args) -> int:
    if args.plot:
        check_output(args.plot, "--plot", (".png", ".svg", ".pdf"))
    budget = _budget(args)
    source = load_source(args, budget)
    case = source.as_case(args.density, args.seed, budget)
    result = api.study(case, schedules=_study_schedules(args, source), engine=args.engine, progress=not args.json,
                       max_tokens=args.max_tokens, budget=budget)
    print(json.dumps(result.to_json(), indent=1) if args.json else result)
    if args.plot:
        with atomic_path(args.plot, "--plot") as temp:
            result.plot(temp)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


# -- help and demo -------------------------------------------------------------------------------
def _cmd_help(args) -> int:
    if not args.topic:
        print(__doc__.strip())
        print(f"\nhelp topics: {', '.join(TOPICS)} (fuseflow help TOPIC); fuseflow COMMAND --help for a command")
        return 0
    if args.topic in TOPICS:
        print(topic_text(args.topic))
        return 0
    commands = args.subcommands
    if args.topic in commands:
        commands[args.topic].print_help()
        return 0
    raise UserError(f"no help topic or command {args.topic!r}", "help",
                    f"topics: {', '.join(TOPICS)}; commands: {', '.join(sorted(commands))}")


def _cmd_demo(args) -> int:
    return run_demo(seed=args.seed)


# -- the parser ----------------------------------------------------------------------------------
def _model_command(sub, name: str, help_text: str, run, default_model=None):
    p = sub.add_parser(name, help=help_text, description=help_text)
    add_source_arguments(p, default_model)
    p.set_defaults(run=run)
    return p


def _schedule_option(p) -> None:
    p.add_argument("--schedule", help='a preset (unfused, partial, full) or a schedule string, '
                   'e.g. "full order=i,k,j", "fusion=[t1,t2][t3] order.1=#2 layout=induced" '
                   "(fuseflow help schedules; default: the first of full, full layout=induced, unfused, "
                   "unfused layout=induced that compiles)")


def _add_model_commands(sub) -> None:
    p = _model_command(sub, "inspect", "print the tensor program of a model", _cmd_inspect)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = _model_command(sub, "compile", "lower a schedule to dataflow graphs", _cmd_compile)
    _schedule_option(p)
    p.add_argument("--table", action="store_true", help="print each group's fusion table")
    p.add_argument("--text", action="store_true", help="print each graph as text")
    p.add_argument("-o", "--output", metavar="FILE.json", help="write the graph(s) as JSON")
    p.add_argument("--svg", metavar="FILE.svg", help="draw the graph(s); several kernels give FILE.k0.svg, ... "
                                                    "(needs Graphviz)")
    p.add_argument("--overview", metavar="OUT.svg", help="draw the kernels and the tensors between them")
    p.add_argument("--html", metavar="OUT.html", help="write an interactive report (one self-contained file)")
    p.add_argument("--emit", nargs=2, action="append", metavar=("FORMAT", "DIR"),
                   help="write the graphs for the reference tools: comal (protobuf graphs with the tensor "
                        "files Comal reads; data from --inputs, else generated) or sam-gv (SAM's .gv graphs); "
                        "repeatable")

    p = _model_command(sub, "orders", "count and list the valid dataflow orders of each group (as order.N=#k "
                       "names them), the default marked", _cmd_orders)
    _schedule_option(p)
    p.add_argument("--group", type=count, help="only this group")
    p.add_argument("--limit", type=count, default=50, metavar="N", help="list at most N orders per group (0: all)")
    p.add_argument("-v", "--verbose", action="store_true", help="also list unsupported orders and why")

    p = _model_command(sub, "simulate", "simulate a schedule cycle by cycle and verify its outputs", _cmd_simulate)
    _schedule_option(p)
    p.add_argument("--save-outputs", metavar="OUT.npz", help="save the outputs keyed out0, out1, ...")
    p.add_argument("--hbm", action="store_true", help="model memory channels for scans, arrays and writers")
    p.add_argument("--depth", type=positive, help="bound every channel to this many tokens (detects deadlock)")
    p.add_argument("--engine", choices=["fast", "oracle"], default="fast")
    p.add_argument("--json", action="store_true", help="machine-readable result")
    p.add_argument("--html", metavar="OUT.html", help="also write an interactive report (one self-contained file), "
                   "even when the simulation deadlocks or fails verification")

    p = sub.add_parser("study", help="studies over schedules: `study fusion` compares granularities")
    studies = p.add_subparsers(dest="study", required=True)
    p = _model_command(studies, "fusion", "simulate unfused, partial and full fusion of a model", _cmd_study,
                       default_model="gcn")
    p.add_argument("--schedule", action="append", metavar="S",
                   help="a schedule to study (repeatable; a preset name or any schedule string)")
    p.add_argument("--schedules", metavar="P,P,...",
                   help="comma-separated preset names (default unfused,partial,full when no --schedule)")
    p.add_argument("--engine", choices=["fast", "oracle"], default="fast")
    p.add_argument("--json", action="store_true")
    p.add_argument("--plot", metavar="OUT.png", help="grouped bar chart of the ratios")
    p.add_argument("--max-tokens", type=positive_real, default=MAX_TOKENS, metavar="N",
                   help="estimate, not simulate, schedules the heuristic puts above N token events "
                        f"(default {MAX_TOKENS:.0e}, about five minutes of simulation)")
    add_suite_command(studies)


def build_parser() -> Parser:
    parser = Parser(prog="fuseflow", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"fuseflow {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show library warnings and log lines, and tracebacks of internal errors")
    parser.add_argument("--max-memory", type=size, metavar="SIZE",
                        help="memory a run may take, e.g. 4G (default: what the machine has available)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    _add_model_commands(sub)
    add_sweep_commands(sub)
    add_figure_option(sub.choices["plot"], sub.choices["plot"].get_default("run"))
    add_gpu_commands(sub)

    p = sub.add_parser("help", help="help topics (schedules, datasets, models) or a command's help")
    p.add_argument("topic", nargs="?", help="a topic or a command name")
    p.set_defaults(run=_cmd_help, subcommands=sub.choices)
    p = sub.add_parser("demo", help="import the built-in GCN on the karate club and check the reference")
    p.add_argument("--seed", type=count, default=0)
    p.set_defaults(run=_cmd_demo)
    return parser


def _internal(err: BaseException) -> str:
    text = str(err).splitlines()[0] if str(err) else ""
    return f"fuseflow: internal error: {type(err).__name__}: {text} (rerun with --debug for the traceback and " \
           "please report it)"


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # --help, --version, or a one-line usage error (status 2)
        return done.code if isinstance(done.code, int) else 2
    try:
        with quiet(not args.debug):
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
    except (MemoryError, RecursionError) as err:  # the input is larger or deeper than fuseflow can take
        if args.debug:
            raise
        what, fix = ("ran out of memory", "give a smaller input, or set --max-memory to be stopped before "
                     "allocating") if isinstance(err, MemoryError) else \
            ("the input is nested too deeply (Python's recursion limit)", "give a smaller or flatter input")
        print(f"fuseflow: error: {what} (fix: {fix}; rerun with --debug for the traceback)", file=sys.stderr)
        return 2
    except Exception as err:  # an internal bug: one line unless --debug
        if args.debug:
            raise
        print(_internal(err), file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
