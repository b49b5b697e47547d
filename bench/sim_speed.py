"""Speed of the fast simulation engine (fuseflow.sim.fast) against the oracle and scipy.

    python bench/sim_speed.py             # SpMM, SpMV, and a GCN layer on Cora if the data is there
    python bench/sim_speed.py --cold      # numba compiles from scratch (a fresh cache directory)
    python bench/sim_speed.py --quick     # smaller problems

Token events = tokens over all streams of a run (sum of GraphRun.stream_tokens). Simulation time
is the time spent in run_graph (storage conversion and compilation excluded); "first" runs include
loading (or, with --cold, compiling) the numba kernels. The oracle runs on the full problem when
it has at most --oracle-events events, otherwise on a scaled-down problem of the same shape
(said in the output); the fast/oracle ratio is measured on whichever problem the oracle ran.
Not a test: pytest does not collect this directory.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _setup_numba_cache(cold: bool) -> None:
    if cold:  # must happen before numba is imported
        os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="fuseflow-numba-")


def spmm_mlir(n: int, f: int, encoding: str) -> str:
    """Y = A·X with A n×n sparse (`encoding` CSR or DCSR), X n×f dense."""
    levels = {"CSR": "i : dense, k : compressed", "DCSR": "i : compressed, k : compressed"}[encoding]
    return f"""
#SP = #sparse_tensor.encoding<{{ map = (i, k) -> ({levels}) }}>
#mapA = affine_map<(i, k, j) -> (i, k)>
#mapX = affine_map<(i, k, j) -> (k, j)>
#mapY = affine_map<(i, k, j) -> (i, j)>
func.func @spmm(%A: tensor<{n}x{n}xf32, #SP>, %X: tensor<{n}x{f}xf32>) -> tensor<{n}x{f}xf32> {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<{n}x{f}xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<{n}x{f}xf32>) -> tensor<{n}x{f}xf32>
  %Y = linalg.generic {{indexing_maps = [#mapA, #mapX, #mapY],
                       iterator_types = ["parallel", "reduction", "parallel"]}}
      ins(%A, %X : tensor<{n}x{n}xf32, #SP>, tensor<{n}x{f}xf32>) outs(%init : tensor<{n}x{f}xf32>) {{
  ^bb0(%a: f32, %x: f32, %acc: f32):
    %p = arith.mulf %a, %x : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }} -> tensor<{n}x{f}xf32>
  return %Y : tensor<{n}x{f}xf32>
}}
"""


def spmv_mlir(n: int, encoding: str) -> str:
    levels = {"CSR": "i : dense, j : compressed", "DCSR": "i : compressed, j : compressed"}[encoding]
    return f"""
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


def gcn_mlir(n: int, f: int, h: int) -> str:
    """One GCN layer ReLU((A·X)·W + b): A n×n and X n×f CSR, W f×h dense, b h."""
    return f"""
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


class Timed:
    """A run_graph_fn for execute() that times the engine and counts token events."""

    def __init__(self, fn):
        self.fn, self.seconds, self.events, self.cycles = fn, 0.0, 0, 0

    def __call__(self, graph, tensors, hw=None):
        start = time.perf_counter()
        run = self.fn(graph, tensors, hw)
        self.seconds += time.perf_counter() - start
        self.events += sum(run.stream_tokens.values())
        self.cycles += run.cycles
        return run


def simulate(compiled, data, fn):
    from fuseflow.execute import execute

    timer = Timed(fn)
    start = time.perf_counter()
    result = execute(compiled, data, run_graph_fn=timer)
    return result, timer, time.perf_counter() - start


def best_of(fn, repeat=5):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def fmt_rate(events, seconds):
    return f"{events / seconds / 1e6:7.1f} M events/s" if seconds > 0 else "-"


def bench_case(label, make_program, schedule, make_data, scipy_fn, args, small_program=None):
    import numpy as np

    from fuseflow.fusion.compile import compile_schedule
    from fuseflow.sim import fast, oracle

    program = make_program()
    data = make_data(program)
    compiled = compile_schedule(program, schedule)
    result, first, _ = simulate(compiled, data, fast.run_graph)
    _, second, _ = simulate(compiled, data, fast.run_graph)
    product = scipy_fn(data)  # the scipy product on operands converted beforehand
    want = product()
    got = result.outputs[program.outputs[0]]
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9), f"{label}: the simulation is wrong"
    scipy_s = best_of(product)
    print(f"{label}")
    print(f"  {second.events:,} token events, {second.cycles:,} cycles")
    print(f"  fast   first {first.seconds:8.3f} s   second {second.seconds:8.3f} s   "
          f"{fmt_rate(second.events, second.seconds)}")
    print(f"  scipy  {scipy_s * 1e3:8.3f} ms   simulation/scipy = {second.seconds / scipy_s:,.0f}x "
          "(scipy.sparse CSR product, operands converted beforehand)")
    # the oracle: the same problem if small enough, otherwise a scaled-down one
    if second.events <= args.oracle_events:
        o_compiled, o_data, o_fast, note = compiled, data, second, "same problem"
    elif small_program is not None:
        o_program = small_program()
        o_data = make_data(o_program)
        o_compiled = compile_schedule(o_program, schedule)
        _, o_fast, _ = simulate(o_compiled, o_data, fast.run_graph)
        note = f"scaled down to {o_fast.events:,} events: the full problem is too slow for the oracle"
    else:
        print("  oracle skipped (too slow for this size)")
        return
    o_result, o_timer, _ = simulate(o_compiled, o_data, oracle.run_graph)
    print(f"  oracle {o_timer.seconds:8.3f} s   {fmt_rate(o_timer.events, o_timer.seconds)}   "
          f"fast/oracle speed = {o_timer.seconds / o_fast.seconds:,.0f}x  ({note})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="compile the numba kernels from scratch")
    parser.add_argument("--quick", action="store_true", help="smaller problems")
    parser.add_argument("--oracle-events", type=int, default=4_000_000,
                        help="largest run (token events) the oracle simulates in full")
    parser.add_argument("--cora", default=os.path.join(ROOT, "..", "shared", "data", "cora.npz"))
    args = parser.parse_args(argv)
    _setup_numba_cache(args.cold)
    sys.path.insert(0, os.path.join(ROOT, "src"))

    import numpy as np
    import scipy.sparse as sp

    import fuseflow
    from fuseflow.sim import fast

    # numba: load (or compile) every kernel once, on a tiny problem that uses most of them
    start = time.perf_counter()
    warm = fuseflow.from_mlir(spmm_mlir(8, 2, "CSR"))
    warm_data = fuseflow.random_inputs(warm, density=0.5, seed=0)
    from fuseflow.fusion.compile import compile_schedule
    for order in ("i,j,k", "i,k,j"):
        simulate(compile_schedule(warm, f"full layout=induced order={order}"), warm_data, fast.run_graph)
    jit = time.perf_counter() - start
    print(f"numba kernels {'compiled (cold cache)' if args.cold else 'loaded from the cache'} "
          f"on a tiny SpMM: {jit:.2f} s\n")

    n, f = (300, 16) if args.quick else (1000, 16)
    small = 200

    def spmm_data(density):
        def make(program):
            return fuseflow.random_inputs(program, density=density, seed=1)
        return make

    def spmm_scipy(data):
        A, X = sp.csr_matrix(data["A"]), data["X"]
        return lambda: A @ X

    def spmv_scipy(data):
        A, x = sp.csr_matrix(data["A"]), data["x"]
        return lambda: A @ x

    # orders name the variables of the generic: i (rows), j (the reduction, d1), k (columns, d2)
    orders = {"i,j,k": "row-wise (Gustavson: i, reduction, column; a sparse accumulator)",
              "i,k,j": "inner product (i, column, reduction; an intersection per output)"}
    for density in (0.01, 0.05):
        for order, what in orders.items():
            bench_case(f"SpMM {n}x{n} CSR at {density:.0%} x dense {n}x{f}, order {order}: {what}",
                       lambda: fuseflow.from_mlir(spmm_mlir(n, f, "CSR")),
                       f"full layout=induced order={order}", spmm_data(density), spmm_scipy, args,
                       small_program=lambda: fuseflow.from_mlir(spmm_mlir(small, f, "CSR")))
            print()

    for enc in ("CSR", "DCSR"):
        bench_case(f"SpMV {n}x{n} {enc} at 5% x dense {n}",
                   lambda: fuseflow.from_mlir(spmv_mlir(n, enc)), "full layout=induced", spmm_data(0.05),
                   spmv_scipy, args,
                   small_program=lambda: fuseflow.from_mlir(spmv_mlir(small, enc)))
        print()

    if not os.path.exists(args.cora):
        print(f"GCN on Cora: skipped ({args.cora} not found)")
        return 0
    z = np.load(args.cora, allow_pickle=False)
    nodes = len(z["adj_indptr"]) - 1
    features = int(z["x_shape"][1])
    hidden = 16
    A = sp.csr_matrix((np.ones(len(z["adj_indices"])), z["adj_indices"], z["adj_indptr"]), shape=(nodes, nodes))
    X = sp.csr_matrix((z["x_data"].astype(np.float64), z["x_indices"], z["x_indptr"]),
                      shape=(int(z["x_shape"][0]), features))
    rng = np.random.default_rng(0)
    W, b = rng.normal(size=(features, hidden)), rng.normal(size=hidden)
    start = time.perf_counter()
    program = fuseflow.from_mlir(gcn_mlir(nodes, features, hidden))
    compiled = compile_schedule(program, "full")
    data = {"A": A.toarray(), "X": X.toarray(), "W": W, "b": b}
    result, first, first_wall = simulate(compiled, data, fast.run_graph)
    total_first = time.perf_counter() - start
    _, second, second_wall = simulate(compiled, data, fast.run_graph)
    gold = np.maximum(A @ X @ W + b, 0.0)
    assert np.allclose(result.outputs[program.outputs[0]], gold, rtol=1e-9, atol=1e-9), "GCN is wrong"
    scipy_s = best_of(lambda: np.maximum(A @ X @ W + b, 0.0))
    orders = "; ".join(",".join(k.order) for k in compiled.kernels if k.order)
    print(f"GCN layer ReLU((A·X)·W + b) on Cora ({nodes} nodes, {A.nnz:,} edges, {features} features, "
          f"{X.nnz:,} nonzeros; W {features}x{hidden}), schedule full, order {orders}")
    print(f"  {second.events:,} token events, {second.cycles:,} cycles")
    print(f"  wall, first run (parse, compile, store, simulate): {total_first:.2f} s   target < 30 s")
    print(f"  fast   first {first.seconds:8.3f} s (execute {first_wall:.2f} s)   second {second.seconds:8.3f} s "
          f"(execute {second_wall:.2f} s)   {fmt_rate(second.events, second.seconds)}   target >= 20 M/s")
    print(f"  scipy  {scipy_s * 1e3:8.3f} ms   simulation/scipy = {second.seconds / scipy_s:,.0f}x "
          "(ReLU((A@X)@W + b) with A, X scipy CSR)")
    print("  oracle skipped (minutes at this size; see the SpMM ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
