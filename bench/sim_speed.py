"""Speed and memory of the streaming engine (fuseflow.sim.fast), measured in one run against scipy,
the oracle, and the same engine keeping whole streams (chunking off).

    python bench/sim_speed.py                  # every case, each in a child process (its own peak memory)
    python bench/sim_speed.py --case spgemm    # one case
    python bench/sim_speed.py --quick          # smaller problems

Token events = tokens over all streams of a run (sum of GraphRun.stream_tokens). Engine time is
the time in run_graph (storage and compilation excluded), best of five runs (two for whole
streams) after a warm-up that loads the numba kernels. "whole/chunked" is the same engine with
every stream kept whole (`chunk=WHOLE`) over the default bounded buffers: above 1 means chunking
costs nothing. The oracle runs the same problem when it has at most --oracle-events events, else
a scaled-down one (said in the output). Peak memory is the child process's peak resident set (what
`/usr/bin/time -f %M` reports), so it includes Python, numpy, numba and the data.

The `gcn-study` case is a whole `fuseflow study fusion --model gcn --dataset cora` (three
presets: compile, encode, simulate, reference, verify), timed end to end.

Against a named commit, in one run (a speed regression shows as a ratio below 1):

    python bench/sim_speed.py --against ec6264e                  # the engine cases, 5 pairs each
    python bench/sim_speed.py --against HEAD --case spgemm-outer --pairs 9
    python bench/sim_speed.py --against ec6264e --remove-tree    # the worktree removed after
    python bench/sim_speed.py --against 680e110^ --at 680e110     # two commits (bisecting)

The commit is checked out into a git worktree under the temporary directory (`two_trees`), kept
for the next run (its numba cache stays warm) unless --remove-tree; `--at` puts a second commit
in the working tree's place. Both trees run this file's cases on their own sources
(PYTHONPATH=TREE/src) with the same Python: per case one uncounted process per tree fills numba's
cache, then --pairs rounds of one process per tree, working tree first (A B A B ...). A process
reports its engine time (best of --runs) and token events; /usr/bin/time its wall time and peak
memory. Printed per case and tree: events/s as median (min-max) over the processes, token events
and cycles (they differ where the commits' timing models differ), peak memory, process time;
then events/s working/baseline pair by pair: the median and range (a range that straddles 1.0
says the difference is within the noise). A baseline that lacks a case, an option or a module
the child needs is reported with its error and skipped. The working tree includes uncommitted
changes: `--against HEAD` measures them.
Not a test: pytest does not collect this directory.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = ("spmm-rowwise-1", "spmm-inner-1", "spmm-rowwise-5", "spmm-inner-5", "spmv-csr", "spmv-dcsr",
         "spgemm-outer", "gcn-layer", "gcn-study")

SPMM = """
#SP = #sparse_tensor.encoding<{{ map = (i, k) -> ({levels}) }}>
#mapA = affine_map<(i, k, j) -> (i, k)>
#mapX = affine_map<(i, k, j) -> (k, j)>
#mapY = affine_map<(i, k, j) -> (i, j)>
func.func @spmm(%A: tensor<{n}x{n}xf32, #SP>, %X: tensor<{n}x{f}xf32{xenc}>) -> tensor<{n}x{f}xf32{yenc}> {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<{n}x{f}xf32{yenc}>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<{n}x{f}xf32{yenc}>) -> tensor<{n}x{f}xf32{yenc}>
  %Y = linalg.generic {{indexing_maps = [#mapA, #mapX, #mapY],
                       iterator_types = ["parallel", "reduction", "parallel"]}}
      ins(%A, %X : tensor<{n}x{n}xf32, #SP>, tensor<{n}x{f}xf32{xenc}>) outs(%init : tensor<{n}x{f}xf32{yenc}>) {{
  ^bb0(%a: f32, %x: f32, %acc: f32):
    %p = arith.mulf %a, %x : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }} -> tensor<{n}x{f}xf32{yenc}>
  return %Y : tensor<{n}x{f}xf32{yenc}>
}}
"""
LEVELS = {"CSR": "i : dense, k : compressed", "DCSR": "i : compressed, k : compressed"}

SPMV = """
#SP = #sparse_tensor.encoding<{{ map = (i, j) -> ({levels}) }}>
func.func @spmv(%A: tensor<{n}x{n}xf32, #SP>, %x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<{n}xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<{n}xf32>) -> tensor<{n}xf32>
  %y = linalg.matvec ins(%A, %x : tensor<{n}x{n}xf32, #SP>, tensor<{n}xf32>)
                     outs(%init : tensor<{n}xf32>) -> tensor<{n}xf32>
  return %y : tensor<{n}xf32>
}}
"""

ENGINE_CASES = tuple(c for c in CASES if c != "gcn-study")  # the default of --against

GCN_LAYER = """
#CSR = #sparse_tensor.encoding<{{ map = (i, j) -> (i : dense, j : compressed) }}>
#id = affine_map<(d0, d1) -> (d0, d1)>
#bias = affine_map<(d0, d1) -> (d1)>
func.func @gcn_layer(%A: tensor<{n}x{n}xf32, #CSR>, %X: tensor<{n}x{f}xf32, #CSR>,
                     %W: tensor<{f}x{h}xf32>, %b: tensor<{h}xf32>) -> tensor<{n}x{h}xf32> {{
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<{n}x{f}xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<{n}x{f}xf32>) -> tensor<{n}x{f}xf32>
  %AX = linalg.matmul ins(%A, %X : tensor<{n}x{n}xf32, #CSR>, tensor<{n}x{f}xf32, #CSR>)
                      outs(%f1 : tensor<{n}x{f}xf32>) -> tensor<{n}x{f}xf32>
  %e2 = tensor.empty() : tensor<{n}x{h}xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<{n}x{h}xf32>) -> tensor<{n}x{h}xf32>
  %T = linalg.matmul ins(%AX, %W : tensor<{n}x{f}xf32>, tensor<{f}x{h}xf32>)
                     outs(%f2 : tensor<{n}x{h}xf32>) -> tensor<{n}x{h}xf32>
  %H = linalg.generic {{indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%T, %b : tensor<{n}x{h}xf32>, tensor<{h}xf32>) outs(%e2 : tensor<{n}x{h}xf32>) {{
  ^bb0(%x: f32, %bj: f32, %out: f32):
    %s = arith.addf %x, %bj : f32
    %pos = arith.cmpf ugt, %s, %zero : f32
    %r = arith.select %pos, %s, %zero : f32
    linalg.yield %r : f32
  }} -> tensor<{n}x{h}xf32>
  return %H : tensor<{n}x{h}xf32>
}}
"""


def spmm(n, f, enc="CSR", xenc="", yenc=""):
    return SPMM.format(n=n, f=f, levels=LEVELS[enc], xenc=xenc, yenc=yenc)


def _problem(case: str, quick: bool, scale: float = 1.0):
    """(label, program text, schedule, data maker, scipy product maker) of a case."""
    import scipy.sparse as sp

    import fuseflow

    n = max(16, int((300 if quick else 1000) * scale))
    if case.startswith("spmm"):
        _, order, pct = case.split("-")
        density = int(pct) / 100
        # the program names the generic's variables i (rows, d0), j (the reduction, d1), k (columns, d2)
        sched = {"rowwise": "i,j,k", "inner": "i,k,j"}[order]
        what = {"rowwise": "Gustavson: rows, reduction, columns (a sparse accumulator)",
                "inner": "inner products: rows, columns, reduction (an intersection per output)"}[order]

        def data(program):
            return fuseflow.random_inputs(program, density=density, seed=1)

        return (f"SpMM {n}x{n} CSR at {density:.0%} x dense {n}x16, order {sched}: {what}",
                spmm(n, 16), f"full layout=induced order={sched}", data,
                lambda d: _product(d["A"], d["X"]))
    if case.startswith("spmv"):
        enc = case.split("-")[1].upper()

        def data(program):
            return fuseflow.random_inputs(program, density=0.05, seed=1)

        return (f"SpMV {n}x{n} {enc} at 5% x dense {n}", SPMV.format(n=n, levels=LEVELS[enc].replace("k :", "j :")),
                "full layout=induced", data, lambda d: _product(d["A"], d["x"]))
    if case == "spgemm-outer":
        dcsr = ", #SP"

        def data(program):
            return fuseflow.random_inputs(program, density=0.05, seed=1)

        return (f"SpGEMM {n}x{n} DCSR at 5% x {n}x{n} DCSR at 5% into DCSR, order j,i,k (outer products: the "
                "reduction j outermost, an order-2 accumulator)",
                spmm(n, n, "DCSR", dcsr, dcsr), "full layout=induced order=j,i,k", data,
                lambda d: _product(d["A"], sp.csr_matrix(d["X"])))
    raise SystemExit(f"unknown case {case}")


def _product(left, right):
    """scipy's product of the operands, converted beforehand (left to CSR)."""
    import scipy.sparse as sp

    a = sp.csr_matrix(left)
    return lambda: a @ right


def _engine_runs(compiled, data, chunk):
    """(GraphRun list, engine seconds) of one execution of every kernel."""
    from fuseflow.execute import execute
    from fuseflow.sim import fast

    runs, seconds = [], [0.0]

    def run(graph, tensors, hw=None):
        start = time.perf_counter()
        r = fast.run_graph(graph, tensors, hw, chunk=chunk)
        seconds[0] += time.perf_counter() - start
        runs.append(r)
        return r

    result = execute(compiled, data, run_graph_fn=run)
    return result, runs, seconds[0]


def _oracle_seconds(compiled, data) -> float:
    from fuseflow.execute import execute
    from fuseflow.sim import oracle

    start = time.perf_counter()
    execute(compiled, data, run_graph_fn=oracle.run_graph)
    return time.perf_counter() - start


def _events(runs) -> int:
    return sum(sum(r.stream_tokens.values()) for r in runs)


def _best(fn, repeat=2):
    return min(fn() for _ in range(repeat))


def _kernel_case(case: str, args) -> dict:
    import numpy as np

    import fuseflow
    from fuseflow.fusion.compile import compile_schedule
    from fuseflow.sim.fast.engine import WHOLE

    label, text, schedule, make_data, scipy_of = _problem(case, args.quick)
    program = fuseflow.from_mlir(text)
    data = make_data(program)
    compiled = compile_schedule(program, schedule)
    result, runs, _ = _engine_runs(compiled, data, None)  # warm: numba kernels loaded
    chunked = _best(lambda: _engine_runs(compiled, data, None)[2], repeat=args.runs)
    if args.engine_only:
        return {"case": case, "label": label, "events": _events(runs), "cycles": sum(r.cycles for r in runs),
                "engine_s": chunked}
    whole = _best(lambda: _engine_runs(compiled, data, WHOLE)[2])
    product = scipy_of(data)
    want = product()
    want = want.toarray() if hasattr(want, "toarray") else want
    got = result.outputs[program.outputs[0]]
    got = got.toarray() if hasattr(got, "toarray") else got
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9), f"{case}: the simulation is wrong"
    scipy_s = _best(lambda: _timed(product), repeat=5)
    events = _events(runs)
    out = {"case": case, "label": label, "events": events, "cycles": sum(r.cycles for r in runs),
           "engine_s": chunked, "whole_s": whole, "scipy_s": scipy_s}
    if events <= args.oracle_events:
        out["oracle_s"], out["oracle_note"] = _oracle_seconds(compiled, data), "same problem"
        out["oracle_fast_s"] = chunked
    else:
        small_label, small_text, _, _, _ = _problem(case, args.quick, scale=0.2)
        small = fuseflow.from_mlir(small_text)
        small_data = make_data(small)
        small_compiled = compile_schedule(small, schedule)
        _engine_runs(small_compiled, small_data, None)
        out["oracle_fast_s"] = _best(lambda: _engine_runs(small_compiled, small_data, None)[2])
        out["oracle_s"] = _oracle_seconds(small_compiled, small_data)
        out["oracle_note"] = "scaled down to a fifth of the size"
    return out


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _gcn_layer(args) -> dict:
    import numpy as np
    import scipy.sparse as sp

    import fuseflow
    from fuseflow.data import load_graph
    from fuseflow.fusion.compile import compile_schedule
    from fuseflow.sim.fast.engine import WHOLE

    graph = load_graph(args.cora)
    (nodes, features), hidden = graph.features.shape, 16
    A, X = sp.csr_matrix(graph.adjacency), sp.csr_matrix(graph.features.astype(np.float64))
    rng = np.random.default_rng(0)
    W, b = rng.normal(size=(features, hidden)), rng.normal(size=hidden)
    program = fuseflow.from_mlir(GCN_LAYER.format(n=nodes, f=features, h=hidden))
    compiled = compile_schedule(program, "full")
    data = {"A": A, "X": X, "W": W, "b": b}
    result, runs, _ = _engine_runs(compiled, data, None)
    gold = np.maximum(A @ X @ W + b, 0.0)
    assert np.allclose(result.outputs[program.outputs[0]], gold, rtol=1e-9, atol=1e-9), "GCN is wrong"
    label = f"GCN layer ReLU((A·X)·W + b) on {graph.name} ({nodes} nodes, {A.nnz:,} edges, {features} features)"
    out = {"case": "gcn-layer", "label": label + ", fully fused", "events": _events(runs),
           "cycles": sum(r.cycles for r in runs),
           "engine_s": _best(lambda: _engine_runs(compiled, data, None)[2], repeat=args.runs)}
    if args.engine_only:
        return out
    return {**out, "whole_s": _best(lambda: _engine_runs(compiled, data, WHOLE)[2]),
            "scipy_s": _best(lambda: _timed(lambda: np.maximum(A @ X @ W + b, 0.0)), repeat=5)}


def _gcn_study(args) -> dict:
    from fuseflow.models.registry import build
    from fuseflow.studies.granularity import fusion_study

    build("gcn", dataset="karate")
    fusion_study(build("gcn", dataset="karate"), ["unfused", "partial", "full"])  # numba kernels loaded
    start = time.perf_counter()
    case = build("gcn", dataset=args.cora)
    rows = fusion_study(case, ["unfused", "partial", "full"])
    wall = time.perf_counter() - start
    # as the study's JSON: a tree before studies.row gives dicts, one since then `ResultRow`s
    rows = [row if isinstance(row, dict) else row.study_json() for row in rows]
    assert all(r["verified"] is True for r in rows), rows
    from fuseflow.pipeline import simulate

    events = 0
    for row in rows:  # token events of each preset, counted by one more (untimed) run
        events += simulate(case.program, case.presets[row["schedule"]], case.inputs).tokens
    return {"case": "gcn-study", "label": f"fuseflow study fusion --model gcn --dataset {args.cora} (unfused, partial, "
            "full: compile, encode, simulate, reference, verify)", "events": events, "wall_s": wall,
            "speedups": [round(r["speedup"], 2) for r in rows]}


def child(case: str, args) -> None:
    src = os.path.abspath(args.src or os.path.join(ROOT, "src"))
    sys.path.insert(0, src)
    import fuseflow

    if not os.path.abspath(fuseflow.__file__).startswith(src + os.sep):
        print(f"fuseflow imported from {fuseflow.__file__}, not from {src}", file=sys.stderr)
        raise SystemExit(3)
    if case == "gcn-layer":
        out = _gcn_layer(args)
    elif case == "gcn-study":
        out = _gcn_study(args)
    else:
        out = _kernel_case(case, args)
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def _rate(events, seconds):
    return f"{events / seconds / 1e6:7.1f} M events/s" if seconds else "-"


def report(out: dict) -> None:
    if "skipped" in out:
        print(f"{out['case']}: skipped ({out['skipped']})\n")
        return
    print(out["label"])
    if out["case"] == "gcn-study":
        print(f"  {out['events']:,} token events in {out['wall_s']:.1f} s end to end: "
              f"{_rate(out['events'], out['wall_s'])}   target >= 50 M/s   speedups {out['speedups']}")
    else:
        print(f"  {out['events']:,} token events, {out['cycles']:,} cycles")
        print(f"  engine {out['engine_s']:8.3f} s   {_rate(out['events'], out['engine_s'])}   target >= 100 M/s")
        print(f"  whole streams {out['whole_s']:8.3f} s   whole/chunked = {out['whole_s'] / out['engine_s']:.2f}")
        print(f"  scipy {out['scipy_s'] * 1e3:8.3f} ms   simulation/scipy = {out['engine_s'] / out['scipy_s']:,.0f}x")
        if "oracle_s" in out:
            print(f"  oracle {out['oracle_s']:8.3f} s   fast/oracle speed = "
                  f"{out['oracle_s'] / out['oracle_fast_s']:,.0f}x ({out['oracle_note']})")
    print(f"  peak memory {out['peak_mb']:,.0f} MB (the whole process)\n")


def against(args) -> int:
    """Each case in the working tree and in the tree of commit `args.against`, alternately."""
    import two_trees

    here = two_trees.checkout(args.at) if args.at else two_trees.Tree(f"working tree ({_describe()})", ROOT)
    base = two_trees.checkout(args.against)
    print(f"{here.label} against {base.label}: {args.pairs} pairs of processes a case, each process "
          f"the engine's best of {args.runs} runs\n")
    records = []
    try:
        for case in args.case or ENGINE_CASES:
            def argv_of(tree, case=case):
                return [os.path.abspath(__file__), "--child", "--case", case, "--src", tree.src, "--cora", args.cora,
                        "--runs", str(args.runs)] + (["--quick"] if args.quick else []) + \
                    ([] if case == "gcn-study" else ["--engine-only"])

            both = two_trees.Alternation([here, base]).run(argv_of, args.pairs, timeout=args.timeout)
            record = _comparison(case, both, here, base)
            records.append(record)
            print(json.dumps(record) if args.json else _comparison_text(record), flush=True)
    finally:
        for tree in [base] + ([here] if args.at else []):
            if args.remove_tree:
                two_trees.remove(tree)
            else:
                print(two_trees.kept_note(tree))
    return 0


def _describe() -> str:
    """The working tree's commit, with '+changes' when files differ from it."""
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "src", "bench"], cwd=ROOT).returncode
    return head.stdout.strip() + (" +changes" if dirty else "")


def _comparison(case: str, both, here, base) -> dict:
    """A case's record: per tree its processes' rates, cycles, events, peaks and times; the
    ratio working/baseline pair by pair; or why a tree could not run it."""
    import two_trees

    record = {"case": case, "trees": {}, "failed": dict(both.failed)}
    for tree in both.trees:
        runs = both.runs.get(tree.label, [])
        if not runs:
            continue
        first = runs[0].out
        seconds = [r.out.get("engine_s", r.out.get("wall_s")) for r in runs]
        record["label"] = first["label"]
        record["trees"][tree.label] = {
            "events": first["events"], "cycles": first.get("cycles"), "seconds": seconds,
            "rates": [r.out["events"] / x for r, x in zip(runs, seconds)],
            "peak_mb": [r.peak_mb for r in runs], "process_s": [r.seconds for r in runs]}
    if len(record["trees"]) == 2:
        a, b = (record["trees"][t.label]["rates"] for t in (here, base))
        ratio = two_trees.spread([x / y for x, y in zip(a, b)])
        record["ratio"] = {"median": ratio.median, "low": ratio.low, "high": ratio.high}
    return record


def _comparison_text(record: dict) -> str:
    import two_trees

    lines = [f"{record['case']}: {record['label']}" if "label" in record else record["case"]]
    for label, why in record["failed"].items():
        lines.append(f"  {label}: cannot run this case: {why}")
    width = max([len(x) for x in record["trees"]] + [10])
    if record["trees"]:
        lines.append(f"  {'':<{width}} {'M events/s median (range)':>26} {'events':>13} {'cycles':>13} "
                     f"{'peak MB':>8} {'process s':>10}")
    for label, tree in record["trees"].items():
        rate = two_trees.spread([x / 1e6 for x in tree["rates"]])
        cycles = "-" if tree["cycles"] is None else f"{tree['cycles']:,}"
        lines.append(f"  {label:<{width}} {str(rate):>26} {tree['events']:>13,} {cycles:>13} "
                     f"{statistics.median(tree['peak_mb']):>8,.0f} {statistics.median(tree['process_s']):>10.1f}")
    if "ratio" in record:
        r = record["ratio"]
        n = len(next(iter(record["trees"].values()))["rates"])
        lines.append(f"  events/s working/baseline: {r['median']:.2f}x (pairs {r['low']:.2f}-{r['high']:.2f}, n={n})")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=CASES, action="append", help="run only these cases")
    parser.add_argument("--quick", action="store_true", help="smaller problems")
    parser.add_argument("--oracle-events", type=int, default=3_000_000,
                        help="largest run (token events) the oracle simulates in full")
    parser.add_argument("--cora", default="cora", help="the graph of the GCN cases (a dataset name or .npz)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--src", help=argparse.SUPPRESS)  # the child's package sources
    parser.add_argument("--engine-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON lines")
    parser.add_argument("--against", metavar="COMMIT",
                        help="compare the engine's speed with this commit's, alternating processes")
    parser.add_argument("--at", metavar="COMMIT", help="with --against: measure this commit (in a worktree too) "
                        "instead of the working tree")
    parser.add_argument("--pairs", type=int, default=5, help="with --against: processes per tree and case")
    parser.add_argument("--runs", type=int, default=5, help="engine runs per process (the best counts)")
    parser.add_argument("--timeout", type=float, default=900, help="with --against: seconds one process may take")
    parser.add_argument("--remove-tree", action="store_true", help="with --against: remove the worktree after")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.runs < 1:
        parser.error("--pairs and --runs take a positive count")
    if args.child:
        child(args.case[0], args)
        return 0
    if args.against:
        return against(args)
    for case in args.case or CASES:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--case", case, "--cora", args.cora,
               "--oracle-events", str(args.oracle_events)] + (["--quick"] if args.quick else [])
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            print(f"{case}: failed\n{done.stderr[-2000:]}")
            continue
        out = json.loads(done.stdout.strip().splitlines()[-1])
        print(json.dumps(out) if args.json else "", end="\n" if args.json else "")
        if not args.json:
            report(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
