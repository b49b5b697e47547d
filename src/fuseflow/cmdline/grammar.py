"""The `fuseflow` command.

    fuseflow inspect MODEL [--json]                       a Program in index notation
    fuseflow orders MODEL [--schedule S] [--group N]      valid dataflow orders, default and cost
    fuseflow compile MODEL --schedule S [--table] [-o graph.json] [--svg graph.svg]
    fuseflow simulate MODEL --schedule S [--inputs data.npz] [--json]
    fuseflow study fusion MODEL [--schedule S ...] [--plot out.png]
    fuseflow study suite [figure12 | FILE.toml] --db suite.db [--scheduler ADDR] [--page results.md]
    fuseflow sweep ... --db results.sqlite   /   fuseflow plot results.sqlite
    fuseflow tune MODEL [--budget 60] [--lanes P] [--objective cycles|traffic|pareto] [--db F] [--json]
    fuseflow gpu plan --chain G5 [--topk 11] [--json]   /   fuseflow gpu bench
    fuseflow help [schedules | datasets | models | COMMAND]   /   fuseflow demo

MODEL is an .mlir file, FILE.py:Class (or --torch FILE.py:Class --input ...), or a built-in model
(model:gcn, or --model gcn --dataset cora); see `fuseflow help models`.

Bad input prints one line `fuseflow: error: ...` and exits with status 2; an internal error
(exit status 3) is a bug in fuseflow.
"""
from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass

from .. import __version__
from ..models.resolve import BUILT_IN, GRAPH_DATASETS
from ..studies import MAX_TOKENS
from .args import Parser, count, fraction, positive, positive_real, relative, size

DEFAULT_PRUNE = 1.5  # measured: keeps the best schedule of every swept group (docs/exploration.md)
# the GPU planner's commands are read from `cmdline.gpu` only when named (it loads numpy); its line in
# `fuseflow --help` until then (a test keeps it equal to cmdline.gpu's)
GPU_HELP = "plan GEMM->act->GEMM fusion across GPU thread-block clusters (DSM)"


@dataclass(frozen=True)
class Handler:
    """What runs a command: `function` of the module `fuseflow.cmdline.MODULE`, imported only when
    the command runs, so that parsing (and `fuseflow --help`) loads no compiler or simulator.

        >>> Handler("demo")
        Handler(module='demo', function='run')
    """

    module: str
    function: str = "run"

    def __call__(self, args) -> int:
        return getattr(importlib.import_module(f"{__package__}.{self.module}"), self.function)(args)


def build_parser(command: str | None = None) -> Parser:
    """The whole command line; the `gpu` command's grammar only when `command` is `gpu` (a stand-in
    with its help line otherwise; see `command_named`)."""
    parser = Parser(prog="fuseflow", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"fuseflow {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show library warnings and log lines, and tracebacks of internal errors")
    parser.add_argument("--max-memory", type=size, metavar="SIZE",
                        help="memory a run may take, e.g. 4G (default: what the machine has available)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    _add_model_commands(sub)
    _add_study_commands(sub)
    _add_sweep_commands(sub)
    _add_tune_command(sub)
    if command == "gpu":
        from .gpu import add_commands  # noqa: PLC0415 - numpy is slow to import; only `gpu` needs it

        add_commands(sub)
    else:
        sub.add_parser("gpu", help=GPU_HELP)

    p = sub.add_parser("help", help="help topics (schedules, datasets, models) or a command's help")
    p.add_argument("topic", nargs="?", help="a topic or a command name")
    p.set_defaults(run=Handler("help"), subcommands=sub.choices)
    p = sub.add_parser("demo", help="import the built-in GCN on the karate club and check the reference")
    p.add_argument("--seed", type=count, default=0)
    p.set_defaults(run=Handler("demo"))
    return parser


def command_named(argv: list[str]) -> str | None:
    """The command whose grammar `argv` needs: its first word after the top-level options, or the
    word after `help`.

        >>> command_named(["--max-memory", "4G", "help", "gpu"]), command_named(["--debug", "simulate", "x.mlir"])
        ('gpu', 'simulate')
    """
    words, skip = [], False
    for word in argv:
        if skip or word.startswith("-"):
            skip = word == "--max-memory"
            continue
        words.append(word)
        if len(words) == 2:
            break
    return words[1] if words[:1] == ["help"] and len(words) > 1 else (words[0] if words else None)


# -- commands on a model -----------------------------------------------------------------------
def add_source_arguments(parser, default_model: str | None = None) -> None:
    """The model flags every model command takes (one vocabulary: `cmdline.source`)."""
    parser.add_argument("source", nargs="?", metavar="MODEL",
                        help="an .mlir file, FILE.py:Class (a PyTorch module) or model:NAME (built in)")
    group = parser.add_argument_group("model and data (one vocabulary for every command)")
    group.add_argument("--model", default=default_model, metavar="NAME",
                       help=f"built-in model: {', '.join(BUILT_IN)} (or any MODEL form)"
                            + (f"; default {default_model}" if default_model else ""))
    group.add_argument("--dataset", metavar="D",
                       help=f"gcn/graphsage: {GRAPH_DATASETS} or URL.npz#sha256=HEX; sae: "
                            f"{', '.join(BUILT_IN['sae'])}; gpt3-bigbird: {', '.join(BUILT_IN['gpt3-bigbird'])}")
    group.add_argument("--data-dir", metavar="DIR",
                       help="directory with your own cora.npz, ... and for downloads (default: the "
                            "copies shipped with fuseflow; downloads in $FUSEFLOW_DATA or ~/.cache/fuseflow)")
    group.add_argument("--scale", type=positive_real, default=1.0, help="size factor of synthetic graphs")
    group.add_argument("--block", type=positive, default=16,
                       help="gpt3-bigbird: BigBird block size; its presets run blocked with tiles of it")
    group.add_argument("--torch", metavar="FILE.py:CLASS", help="a PyTorch module class")
    group.add_argument("--input", action="append", metavar="SHAPE[:LAYOUT]",
                       help="example input of --torch, in forward() order, e.g. 34x34:csr (layouts: dense, "
                            "csr, csc, coo, bsrB); default: the file's example_inputs()")
    group.add_argument("--init", metavar="JSON", help="keyword arguments of the --torch class's constructor")
    group.add_argument("--timeout", type=positive_real, metavar="SECONDS",
                       help="--torch: seconds for importing the file, building the class and tracing its "
                            "forward() before giving up with an error (default 600)")
    group.add_argument("--func", help="MLIR function to import when the module has several")
    group.add_argument("--format", action="append", metavar="NAME=LEVELS",
                       help="declare an input's storage, e.g. W=compressed,compressed (repeatable)")
    group.add_argument("--shape", action="append", metavar="NAME=AxB",
                       help="shape of an input with dynamic dimensions, e.g. A=64x8, or one size for every "
                            "dynamic dimension, ?=32 (repeatable; default 16, said on stderr)")
    group.add_argument("--strict", action="store_true",
                       help="refuse reading an unfilled dense tensor.empty() (default: zeros, with a note)")
    group.add_argument("--inputs", metavar="FILE.npz",
                       help="input data keyed arg0, arg1, ... or by name (missing ones are generated)")
    group.add_argument("--density", type=fraction, default=0.1, help="density of generated sparse inputs")
    group.add_argument("--seed", type=count, default=0, help="seed of generated inputs and weights")
    parser.set_defaults(default_model=default_model)


def _model_command(sub, name: str, help_text: str, module: str, default_model=None):
    p = sub.add_parser(name, help=help_text, description=help_text)
    add_source_arguments(p, default_model)
    p.set_defaults(run=Handler(module))
    return p


def _schedule_option(p) -> None:
    p.add_argument("--schedule", help='a preset (unfused, partial, full) or a schedule string, '
                   'e.g. "full order=i,k,j", "fusion=[t1,t2][t3] order.1=#2 layout=induced" '
                   "(fuseflow help schedules; default: the first of full, full layout=induced, unfused, "
                   "unfused layout=induced that compiles)")


def _add_model_commands(sub) -> None:
    p = _model_command(sub, "inspect", "print the tensor program of a model", "inspect")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = _model_command(sub, "compile", "lower a schedule to dataflow graphs", "compile")
    _schedule_option(p)
    p.add_argument("--table", action="store_true", help="print each group's fusion table")
    p.add_argument("--text", action="store_true", help="print each graph as text")
    p.add_argument("-o", "--output", metavar="FILE.json", help="write the graph(s) as JSON")
    p.add_argument("--svg", metavar="FILE.svg", help="draw the graph(s); several kernels give FILE.k0.svg, ... "
                                                    "(needs Graphviz)")
    p.add_argument("--ops", metavar="FILE.pdf", help="draw each graph compactly, one box per source op with its "
                                                    "primitive count, sized for a paper's column (.svg, .png, .pdf)")
    p.add_argument("--overview", metavar="OUT.svg", help="draw the kernels and the tensors between them")
    p.add_argument("--html", metavar="OUT.html", help="write an interactive report (one self-contained file)")
    p.add_argument("--emit", nargs=2, action="append", metavar=("FORMAT", "DIR"),
                   help="write the graphs for the reference tools: comal (protobuf graphs with the tensor "
                        "files Comal reads; data from --inputs, else generated) or sam-gv (SAM's .gv graphs); "
                        "repeatable")

    p = _model_command(sub, "orders", "count and list the valid dataflow orders of each group (as order.N=#k "
                       "names them), the default marked", "orders")
    _schedule_option(p)
    p.add_argument("--group", type=count, help="only this group")
    p.add_argument("--limit", type=count, default=50, metavar="N", help="list at most N orders per group (0: all)")
    p.add_argument("-v", "--verbose", action="store_true", help="also list unsupported orders and why")

    p = _model_command(sub, "simulate", "simulate a schedule cycle by cycle and verify its outputs", "simulate")
    _schedule_option(p)
    p.add_argument("--save-outputs", metavar="OUT.npz", help="save the outputs keyed out0, out1, ...")
    p.add_argument("--hbm", action="store_true", help="model memory channels for scans, arrays and writers")
    p.add_argument("--depth", type=positive, help="bound every channel to this many tokens (detects deadlock)")
    p.add_argument("--engine", choices=["fast", "oracle"], default="fast")
    p.add_argument("--json", action="store_true", help="machine-readable result")
    p.add_argument("--html", metavar="OUT.html", help="also write an interactive report (one self-contained file), "
                   "even when the simulation deadlocks or fails verification")
    _partition_options(p)


def _partition_options(p) -> None:
    g = p.add_argument_group("partitioned simulation (windows of every kernel's outer loop; docs/partitioned.md)")
    g.add_argument("--shards", type=positive, metavar="N",
                   help="simulate up to N windows per kernel (each at least 8 outer coordinates wide) as dask tasks "
                        "and combine them (sharded)")
    g.add_argument("--sample", type=fraction, metavar="F",
                   help="estimate cycles from a stratified sample of this share of windows (95%% interval)")
    g.add_argument("--error", type=relative, metavar="E",
                   help="sample until the 95%% interval's half-width is at most E (e.g. 2%%)")
    g.add_argument("--sample-seed", type=count, default=0, metavar="S", help="seed of the sampled windows")
    g.add_argument("--scheduler", metavar="ADDR", help="dask scheduler for the windows (default: a local cluster)")
    g.add_argument("--workers", type=positive, metavar="N", help="local cluster workers (default: one per core)")


TUNE_EPILOG = """\
The search varies the grouping of the ops into kernels (every grouping the compiler accepts, not
only contiguous source lines), each group's dataflow order, the level formats of tensors written
between kernels, layout=induced|declared, and with --lanes P parallel lanes. The heuristic
(calibrated per hardware configuration: --calibrate refits it) orders and filters candidates;
the simulator decides: every candidate counted as simulated ran whole and was verified (or,
above --sample-above, was sampled with a 95% interval, tighter for the finalists, and replaced
the answer only where the interval said it was faster), and the winner is run again from its
schedule string, which `fuseflow simulate --schedule` takes and reproduces (mode: whole or
sampled). --plot charts the Pareto fronts; --scheduler runs the evaluations on dask. With --db
the search log is SQLite; rerun to resume (finished simulations are read, not repeated).
docs/tuning.md says how well it does."""


def _add_tune_command(sub) -> None:
    p = _model_command(sub, "tune", "search schedules (grouping x orders x formats x layout x lanes) with the "
                       "simulator in the loop", "tune")
    p.add_argument("--budget", type=positive_real, default=60.0, metavar="SECONDS",
                   help="seconds the search may take (default 60; the final verified run comes on top)")
    p.add_argument("--max-sims", type=positive, metavar="N", help="simulate at most N schedules (presets included)")
    p.add_argument("--lanes", type=positive, default=1, metavar="P",
                   help="parallel lanes a kernel may use (default 1: every result at equal hardware)")
    p.add_argument("--objective", choices=["cycles", "traffic", "pareto"], default="cycles",
                   help="minimise cycles (default) or memory traffic, or pick candidates for both in turn "
                   "(the Pareto fronts are reported whatever the objective)")
    p.add_argument("--db", metavar="FILE", help="SQLite search log (a sweep database); rerun to resume")
    p.add_argument("--sample-above", type=positive_real, default=1e9, metavar="TOKENS",
                   help="evaluate candidates the heuristic puts above this many token events sampled, with 95%% "
                        "intervals and successive halving (default 1e9; docs/tuning.md)")
    p.add_argument("--scheduler", metavar="ADDR", help="evaluate candidates on this dask scheduler's workers, one "
                   "in flight per worker ('local': a local cluster of --workers processes)")
    p.add_argument("--workers", type=positive, metavar="N", help="--scheduler local: worker processes "
                   "(default: one per core)")
    p.add_argument("--plot", metavar="OUT.png", help="chart the Pareto fronts of cycles against bytes moved and "
                   "against the largest FIFO, presets marked")
    p.add_argument("--hbm", action="store_true", help="simulate with the memory-channel model (the heuristic is "
                   "calibrated per hardware configuration: --calibrate --hbm fits this one)")
    p.add_argument("--engine", choices=["fast", "oracle"], default="fast")
    p.add_argument("--json", action="store_true", help="machine-readable result")
    p.add_argument("--calibrate", action="store_true",
                   help="refit the heuristic's constants to simulated kernels of the training set (a few "
                        "minutes) and store them for this hardware configuration; takes no model")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.formatter_class, p.epilog = argparse.RawDescriptionHelpFormatter, TUNE_EPILOG


# -- studies -------------------------------------------------------------------------------------
STUDY_COLUMNS = """\
columns (one row per schedule; ratios are to the first row, normally unfused):
  kernels      kernels the schedule compiles to (one per fusion group)
  cycles       simulated cycles of all kernels run one after another (GPT-3: "model cycles" scales
               the simulated decoders to the whole model)
  speedup      first row's cycles / this row's cycles (above 1x: faster)
  FLOPs/unf    this row's FLOPs / the first row's: ALU results plus accumulations, counted per
               value (per tile element when blocked); above 1: work repeated, e.g. a producer
               recomputed inside a fused consumer's loop
  mem/unf      this row's memory traffic / the first row's: words read by scanners and arrays plus
               words written by writers (fusion saves the intermediates' writes and reads)
  max fifo     most tokens that ever waited at once in one channel of any kernel: with channels
               at least this deep (--depth in simulate) the cycles are the same
  verified     True when every output equals the numpy reference; "skipped" when the row was
               estimated, not simulated (then ~ marks ratios from the heuristic's estimates)
  wall s       seconds this row took here (compile, simulate, verify)"""


def _add_study_commands(sub) -> None:
    p = sub.add_parser("study", help="studies over schedules: `study fusion` compares granularities")
    studies = p.add_subparsers(dest="study", required=True)
    p = _model_command(studies, "fusion", "simulate unfused, partial and full fusion of a model", "study",
                       default_model="gcn")
    p.add_argument("--schedule", action="append", metavar="S",
                   help="a schedule to study (repeatable; a preset name or any schedule string)")
    p.add_argument("--schedules", metavar="P,P,...",
                   help="comma-separated preset names (default unfused,partial,full when no --schedule)")
    p.add_argument("--engine", choices=["fast", "oracle"], default="fast")
    p.add_argument("--json", action="store_true")
    p.add_argument("--plot", metavar="OUT.png", help="grouped bar chart of the ratios")
    p.add_argument("--max-tokens", type=positive_real, default=MAX_TOKENS, metavar="N",
                   help="sample (to +-2%%), not simulate whole, schedules the heuristic puts above N token events; "
                        "the heuristic's estimate where even a sample would pass 4x N "
                        f"(default {MAX_TOKENS:.0e}, about five minutes of simulation)")
    p.formatter_class, p.epilog = argparse.RawDescriptionHelpFormatter, STUDY_COLUMNS
    _add_suite_command(studies)


def _add_suite_command(studies) -> None:
    """`study suite` on the `study` command's subparsers."""
    p = studies.add_parser("suite", help="a suite of fusion studies (figure12 or a TOML file) on dask, resumable",
                           description="Run every (model, dataset, schedule) of a suite as a task on dask (a local "
                                       "cluster sized to the machine, or --scheduler ADDR), one SQLite row per "
                                       "task; rerun to resume. Built-in: figure12.")
    p.add_argument("suite", nargs="?", default="figure12", metavar="NAME|FILE.toml",
                   help="figure12 (the reference's Figure 12) or a suite TOML file")
    p.add_argument("--db", default="suite.db", help="SQLite database to write (default suite.db; the same "
                                                    "store as sweeps)")
    p.add_argument("--executor", choices=["dask", "serial"], default="dask",
                   help="dask (default: a local cluster unless --scheduler) or serial (in this process)")
    p.add_argument("--scheduler", metavar="ADDR", help="an existing dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--workers", type=positive, help="workers of the local cluster (default: one per core)")
    p.add_argument("--limit", type=count, help="run at most N tasks this time (resume later)")
    p.add_argument("--retry-failed", action="store_true", help="run the tasks that failed before again")
    p.add_argument("--json", action="store_true", help="print the suite's rows as JSON")
    p.add_argument("--csv", metavar="OUT.csv", help="write the suite's rows as CSV")
    p.add_argument("--page", metavar="OUT.md", help="write the results page (its generated part, between "
                                                   "markers, if the file has them)")
    p.add_argument("--figure", metavar="OUT.png", help="draw the Figure-12 chart (and beside it the Figure-14 "
                                                      "chart, figure12 in the name made figure14, where the suite "
                                                      "has published counts)")
    p.add_argument("--tune", type=positive_real, metavar="SECONDS",
                   help="after the suite's tasks, tune each case row (`fuseflow tune`, SECONDS a row; resumable, "
                        "search logs in the database's sibling *-tune.db): the page gets a tuned table")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.set_defaults(run=Handler("suite"))


# -- sweeps --------------------------------------------------------------------------------------
def _add_sweep_commands(sub) -> None:
    """`sweep` and `plot` (with `plot DB --figure 12 [--suite S]`, a suite's Figure-12 chart)."""
    p = sub.add_parser("sweep", help="simulate a product of schedules and data points into SQLite",
                              description="Simulate every granularity x dataflow order x data point; "
                                          "one SQLite row per result; rerun to resume.")
    p.add_argument("programs", nargs="*", metavar="PROGRAM",
                   help="an .mlir file, or model:NAME for a built-in model (e.g. model:gcn)")
    p.add_argument("--config", metavar="SWEEP.toml", help="read the sweep from a TOML file (flags override it)")
    p.add_argument("--granularity", "-g", action="append", metavar="SCHEDULE",
                   help="unfused | partial | full | random:N | any schedule string (repeatable; "
                        "default: unfused, partial, full)")
    p.add_argument("--orders", help="default (the compiler's choice), all (every valid order of each group, "
                                    "one group varied at a time), or order items separated by ';'")
    p.add_argument("--max-orders", type=positive, help="cap on the orders tried per group (default 24)")
    p.add_argument("--par", action="append", metavar="VAR:P[,VAR:P]",
                   help="parallelization of group 0 tried with every schedule (repeatable; 1 = none), "
                        "e.g. --par 1 --par i:2 --par i:4,j:2")
    p.add_argument("--layout", choices=["declared", "induced"], help="layout added to every granularity")
    p.add_argument("--density", action="append", metavar="D", help="density of random sparse inputs "
                   "(repeatable or comma-separated; default 0.1)")
    p.add_argument("--dataset", action="append", metavar="NAME",
                   help="a model's dataset (karate, synthetic:cora, ...) or an .npz of inputs (repeatable)")
    p.add_argument("--block", action="append", metavar="B", help="block-sparse random data in BxB blocks")
    p.add_argument("--seed", action="append", metavar="S", help="seed of the generated data (repeatable)")
    p.add_argument("--random-seed", type=count, help="seed for random:N groupings")
    p.add_argument("--shape", action="append", metavar="NAME=AxB", help="shape of an input with dynamic dims")
    p.add_argument("--func", help="MLIR function to import when the module has several")
    p.add_argument("--scale", type=positive_real, help="scale of synthetic graph datasets (models)")
    p.add_argument("--engine", choices=["fast", "oracle"], help="simulator engine (default fast; oracle "
                                                               "when fast is unavailable)")
    p.add_argument("--no-check", action="store_true", help="skip verification against the numpy reference")
    p.add_argument("--db", help="SQLite database to write (default sweep.db)")
    p.add_argument("--executor", choices=["local", "dask"], help="local processes (default) or dask.distributed "
                   "(the scheduler at --scheduler ADDR, else a local cluster of --jobs workers, default one per core)")
    p.add_argument("--jobs", "-j", type=positive, help="local worker processes (default 1; with --executor dask: "
                                                        "the local cluster's workers)")
    p.add_argument("--scheduler", metavar="ADDR", help="dask scheduler address for --executor dask (default: start "
                                                       "a local cluster)")
    p.add_argument("--prune", type=positive_real, metavar="F", nargs="?", const=DEFAULT_PRUNE,
                   help="skip schedules whose heuristic estimate exceeds F x the best estimate of the "
                        f"same program and data (F defaults to {DEFAULT_PRUNE:g})")
    p.add_argument("--limit", type=count, help="simulate at most N schedules this run (resume later)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.set_defaults(run=Handler("sweep"))

    p = sub.add_parser("plot", help="charts and heuristic/pruning statistics of a sweep database")
    p.add_argument("db", help="a database written by `fuseflow sweep`")
    p.add_argument("-o", "--output", metavar="DIR", help="directory for the charts (default DB-charts/); with "
                                                          "--figure the chart's file (default DB-figureN.png)")
    p.add_argument("--program", help="only rows of this program")
    p.add_argument("--factors", help="pruning factors to evaluate, comma-separated (default 1.25,1.5,2,3)")
    p.add_argument("--no-charts", action="store_true", help="print the statistics only")
    p.add_argument("--format", choices=("png", "svg", "pdf"), default="png",
                   help="the charts' file format (default png; svg and pdf are vector files)")
    p.add_argument("--figure", metavar="12|14", help="draw the reference's Figure 12 from a suite's rows: speedup "
                                                     "over unfused per model and dataset (`fuseflow study suite`); "
                                                     "14: FLOPs against memory accesses over unfused (a suite with "
                                                     "published counts, e.g. figure12)")
    p.add_argument("--suite", metavar="NAME|FILE.toml", help="with --figure: the suite (default: the one that "
                                                             "wrote the rows)")
    p.set_defaults(run=Handler("plot"))
