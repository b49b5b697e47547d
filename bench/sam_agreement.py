"""Cycle agreement with SAM's own simulator: the same kernels on the same data, side by side.

    python bench/sam_agreement.py --sam DIR [--size 500 --density 0.05 --seed 0]
        [--kernels spmm_ikj,spmm_ijk,spmm_kij,spmm_kji,spmv,sddmm,elemmul] [--small 200] [--json] [--keep]

DIR is a checkout of SAM (github.com/weiya711/sam; it is not on PyPI). Its simulator tests run in
this Python under pytest and import pytest-benchmark, sparse (pydata), scipy and matplotlib.

For each kernel the script draws seeded random sparse operands (whole values 1..9, so both gold
checks are exact), writes them as SAM's tensor files (one number a line: `tensor_<T>_mode_<m>_seg`,
`_crd`, `tensor_<T>_mode_vals`, `_shape`, plus the Matrix Market file the suitesparse tests' gold
reads) where that SAM test reads them, runs the test with `--check-gold` and takes the cycles it
records (`extra_info["cycles"]` of the benchmark json). Then it simulates the same program on the
same operands with `fuseflow.simulate` (every output checked against fuseflow's numpy reference),
in the storage formats and loop order of SAM's graph, and prints one row per kernel: SAM cycles,
fuseflow cycles and fuseflow/SAM. Both sides run with unbounded channels (SAM without `--back`,
fuseflow's default HwConfig). A kernel that cannot run on both sides is skipped with the reason.

  kernel    SAM test (sam/sim/test/...)                   program, loop order, formats
  spmm_ikj  reorder-study/test_reorder_matmul_ikj.py      X=B·C, i,k,j; B, C DCSR -> X DCSR
  spmm_ijk  reorder-study/test_reorder_matmul_ijk.py      X=B·C, i,j,k; B DCSR, C DCSC -> X DCSR
  spmm_kij  reorder-study/test_reorder_matmul_kij.py      X=B·C, k,i,j; B DCSC, C DCSR -> X DCSR
  spmm_kji  reorder-study/test_reorder_matmul_kji.py      X=B·C, k,j,i; B DCSC, C DCSR -> X DCSC
  spmv      final-apps/test_mat_vecmul_FINAL.py           x=B·c, j,i; B DCSC, c sparse -> x sparse
  sddmm     final-apps/test_mat_sddmm_FINAL.py            X=B∘(C·D), i,j,k; B DCSR, C, D dense -> DCSR
  elemmul   study-apps/test_vec_elemmul_compressed.py     x=b∘c, i; sparse vectors -> sparse

spmm_kij and spmm_kji (outer products, k outermost) reduce into the order-2 sparse accumulator
(SAM's SparseAccumulator2, fuseflow's spacc2); spmm_kji also writes its result column-major. The
other loop orders of reorder-study (jki: an order-1 accumulator as ikj, jik: an inner product as
ijk, both writing DCSC) add nothing these do not cover.

Sizes: matrices are --size square. spmm_ijk (every row meets every column) and sddmm (SAM's test
fixes k = 256 and C, D = arange) grow faster than the nonzeros in SAM's Python simulator and run
at --small. elemmul's vectors are --size² long (a flattened matrix), shorter where SAM's test,
which writes at most 2000 results, would overflow. Not a test: pytest does not collect bench/.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.io
import scipy.sparse as sp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))
os.environ.setdefault("FUSEFLOW_WORKER", "0")
import fuseflow  # noqa: E402

SSNAME = "agreement"  # the data set name SAM's suitesparse/synthetic tests are given
KDIM = 256            # test_mat_sddmm_FINAL's fixed k extent


def rand_matrix(rng, n, m, density):
    """A seeded n x m CSR matrix with whole values 1..9 and sorted indices."""
    a = sp.random(n, m, density=density, format="csr", random_state=rng,
                  data_rvs=lambda k: rng.integers(1, 10, k).astype(float))
    a.sort_indices()
    return a


def write_lines(path, values):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("".join(f"{int(v)}\n" for v in values))


def write_sam_matrix(dirname, name, a, outer_dim=0, mode_of_level=None):
    """Writes a as a doubly compressed matrix: rows outermost (outer_dim 0, DCSR) or columns
    (outer_dim 1, DCSC). mode_of_level numbers the files of the outer and inner level (SAM's
    suitesparse tests number them by dimension, its synthetic data by level)."""
    m = a.tocsr() if outer_dim == 0 else a.T.tocsr()
    modes = mode_of_level or (outer_dim, 1 - outer_dim)
    fibers = np.flatnonzero(np.diff(m.indptr))
    p = lambda what: os.path.join(dirname, f"tensor_{name}_mode_{what}")  # noqa: E731
    write_lines(p(f"{modes[0]}_seg"), [0, len(fibers)])
    write_lines(p(f"{modes[0]}_crd"), fibers)
    write_lines(p(f"{modes[1]}_seg"), np.concatenate([[0], np.cumsum(np.diff(m.indptr)[fibers])]))
    write_lines(p(f"{modes[1]}_crd"), m.indices)
    write_lines(p("vals"), m.data)
    write_lines(p("shape"), m.shape if mode_of_level else a.shape)


def write_sam_vector(dirname, name, v):
    crd = np.flatnonzero(v)
    p = lambda what: os.path.join(dirname, f"tensor_{name}_mode_{what}")  # noqa: E731
    write_lines(p("0_seg"), [0, len(crd)])
    write_lines(p("0_crd"), crd)
    write_lines(p("vals"), v[crd])
    write_lines(p("shape"), [len(v)])


# --- MLIR for fuseflow: one linalg.generic, loop variables named as in SAM's graph -------------------
def mlir(dims, ins, out, body):
    """dims: [(var, extent, iterator)] in linalg order; ins/out: (name, vars, levels, mode order)
    with levels None for a plain dense tensor; body: 'muladd', 'mul3add' or 'mul'."""
    extent = {v: e for v, e, _ in dims}
    names = [v for v, _, _ in dims]
    encs = {}

    def ttype(t):
        _, vs, levels, order = t
        shape = "x".join(str(extent[v]) for v in vs)
        if levels is None:
            return f"tensor<{shape}xf64>"
        d = [f"d{k}" for k in range(len(vs))]
        enc = f"({', '.join(d)}) -> ({', '.join(f'{d[o]} : {lv}' for o, lv in zip(order, levels))})"
        alias = encs.setdefault(enc, f"#E{len(encs)}")
        return f"tensor<{shape}xf64, {alias}>"

    amap = lambda vs: f"affine_map<({', '.join(names)}) -> ({', '.join(vs)})>"  # noqa: E731
    tin, tout = [ttype(t) for t in ins], ttype(out)
    args = ", ".join(f"%{t[0]}: {ty}" for t, ty in zip(ins, tin))
    its = ", ".join(f'"{it}"' for _, _, it in dims)
    bargs = ", ".join(f"%a{k}: f64" for k in range(len(ins)))
    ops = {"muladd": "%p = arith.mulf %a0, %a1 : f64\n    %r = arith.addf %acc, %p : f64",
           "mul3add": "%q = arith.mulf %a1, %a2 : f64\n    %p = arith.mulf %a0, %q : f64\n"
                      "    %r = arith.addf %acc, %p : f64",
           "mul": "%r = arith.mulf %a0, %a1 : f64"}[body]
    text = f"""func.func @k({args}) -> {tout} {{
  %zero = arith.constant 0.0 : f64
  %empty = tensor.empty() : {tout}
  %init = linalg.fill ins(%zero : f64) outs(%empty : {tout}) -> {tout}
  %out = linalg.generic {{indexing_maps = [{', '.join(amap(t[1]) for t in [*ins, out])}], iterator_types = [{its}]}}
      ins({', '.join('%' + t[0] for t in ins)} : {', '.join(tin)}) outs(%init : {tout}) {{
  ^bb0({bargs}, %acc: f64):
    {ops}
    linalg.yield %r : f64
  }} -> {tout}
  return %out : {tout}
}}
"""
    return "".join(f"{a} = #sparse_tensor.encoding<{{ map = {e} }}>\n" for e, a in encs.items()) + text


CC, DD = ("compressed", "compressed"), ("dense", "dense")


# --- the kernels: operands, SAM's files, the fuseflow program --------------------------------------
def spmm(sam, rng, n, d, order):
    """SAM: ikj reads B, C DCSR from <formatted>/<name>/matmul_kij; ijk reads B DCSR and C DCSC
    (C transposed, files numbered by level) from the synthetic tree's sp_0.95 folders; kij and kji
    read B DCSC and C DCSR from the synthetic tree and write X DCSR (kij) or DCSC (kji)."""
    B, C = rand_matrix(rng, n, n, d), rand_matrix(rng, n, n, d)
    b_fmt, x_order = (CC, (0, 1)), (0, 1)
    if order == "i,k,j":
        where = os.path.join(sam["formatted"], SSNAME, "matmul_kij")
        write_sam_matrix(where, "B", B), write_sam_matrix(where, "C", C)
        c_fmt = (CC, (0, 1))
    elif order == "i,j,k":
        write_sam_matrix(os.path.join(sam["synthetic"], "matrix/DCSR/B_random_sp_0.95"), "B", B, 0, (0, 1))
        write_sam_matrix(os.path.join(sam["synthetic"], "matrix/DCSC/C_random_sp_0.95"), "C", C, 1, (0, 1))
        c_fmt = (CC, (1, 0))
    else:  # k,i,j or k,j,i: the outer product, reduced by the order-2 sparse accumulator
        write_sam_matrix(os.path.join(sam["synthetic"], "matrix/DCSC/B_random_sp_0.95"), "B", B, 1, (0, 1))
        write_sam_matrix(os.path.join(sam["synthetic"], "matrix/DCSR/C_random_sp_0.95"), "C", C, 0, (0, 1))
        b_fmt, c_fmt = (CC, (1, 0)), (CC, (0, 1))
        x_order = (0, 1) if order == "k,i,j" else (1, 0)
    dims = [("i", n, "parallel"), ("j", n, "parallel"), ("k", n, "reduction")]
    text = mlir(dims, [("B", "ik", *b_fmt), ("C", "kj", *c_fmt)], ("X", "ij", CC, x_order), "muladd")
    return text, {"B": B, "C": C}


def spmv(sam, rng, n, d):
    B, c = rand_matrix(rng, n, n, d), rand_matrix(rng, 1, n, d).toarray()[0]
    where = os.path.join(sam["formatted"], SSNAME, "mat_vecmul")
    write_sam_matrix(where, "B", B, outer_dim=1)
    write_sam_vector(where, "c", c)
    scipy.io.mmwrite(os.path.join(sam["mtx"], SSNAME + ".mtx"), B)
    dims = [("i", n, "parallel"), ("j", n, "reduction")]
    text = mlir(dims, [("B", "ij", CC, (1, 0)), ("c", "j", ("compressed",), (0,))],
                ("x", "i", ("compressed",), (0,)), "muladd")
    return text, {"B": B, "c": c}


def sddmm(sam, rng, n, d):
    B = rand_matrix(rng, n, n, d)
    C = np.arange(n * KDIM, dtype=float).reshape(n, KDIM)        # as SAM's test and gold make them
    D = np.arange(KDIM * n, dtype=float).reshape(n, KDIM).T      # stored j-major: D[k, j] = j*K + k
    write_sam_matrix(os.path.join(sam["formatted"], SSNAME, "mat_sddmm"), "B", B)
    scipy.io.mmwrite(os.path.join(sam["mtx"], SSNAME + ".mtx"), B)
    dims = [("i", n, "parallel"), ("j", n, "parallel"), ("k", KDIM, "reduction")]
    ins = [("B", "ij", CC, (0, 1)), ("C", "ik", None, None), ("D", "kj", DD, (1, 0))]
    return mlir(dims, ins, ("X", "ij", CC, (0, 1)), "mul3add"), {"B": B, "C": C, "D": D}


def elemmul(sam, rng, n, d):
    length = min(n * n, int(1600 / d ** 2))  # SAM's test writes at most 2000 results
    b, c = (rand_matrix(rng, 1, length, d).toarray()[0] for _ in range(2))
    for name, v in (("B", b), ("C", c)):
        write_sam_vector(os.path.join(sam["synthetic"], f"random/compressed/{name}_random_sp_0.95"), name, v)
    v1 = ("compressed",)
    text = mlir([("i", length, "parallel")], [("b", "i", v1, (0,)), ("c", "i", v1, (0,))], ("x", "i", v1, (0,)), "mul")
    return text, {"b": b, "c": c}


KERNELS = {  # name: (SAM test, fuseflow order, formats, maker, small)
    "spmm_ikj": ("reorder-study/test_reorder_matmul_ikj.py::test_reorder_matmul_ikj", "i,k,j",
                 "B,C DCSR -> DCSR", lambda s, r, n, d: spmm(s, r, n, d, "i,k,j"), False),
    "spmm_ijk": ("reorder-study/test_reorder_matmul_ijk.py::test_reorder_matmul_ijk[0.95]", "i,j,k",
                 "B DCSR, C DCSC -> DCSR", lambda s, r, n, d: spmm(s, r, n, d, "i,j,k"), True),
    "spmm_kij": ("reorder-study/test_reorder_matmul_kij.py::test_reorder_matmul_kij[0.95]", "k,i,j",
                 "B DCSC, C DCSR -> DCSR", lambda s, r, n, d: spmm(s, r, n, d, "k,i,j"), False),
    "spmm_kji": ("reorder-study/test_reorder_matmul_kji.py::test_reorder_matmul_kji[0.95]", "k,j,i",
                 "B DCSC, C DCSR -> DCSC", lambda s, r, n, d: spmm(s, r, n, d, "k,j,i"), False),
    "spmv": ("final-apps/test_mat_vecmul_FINAL.py::test_mat_vecmul_FINAL", "j,i",
             "B DCSC, c sparse -> sparse", spmv, False),
    "sddmm": ("final-apps/test_mat_sddmm_FINAL.py::test_mat_sddmm_locate_fused", "i,j,k",
              f"B DCSR, C,D dense k={KDIM} -> DCSR", sddmm, True),
    "elemmul": ("study-apps/test_vec_elemmul_compressed.py::test_unit_vec_elemmul_c_c_c[0.95-random-1]", "i",
                "b,c sparse -> sparse", elemmul, False),
}


def run_sam(sam_dir, test, work, timeout):
    """Runs one SAM simulator test with gold checking; returns (cycles, None) or (None, why)."""
    out = os.path.join(work, "bench.json")
    env = dict(os.environ, CI="false", PYTHONPATH=sam_dir, MPLBACKEND="Agg",
               SUITESPARSE_FORMATTED_PATH=os.path.join(work, "formatted"),
               SUITESPARSE_PATH=os.path.join(work, "mtx"), SYNTHETIC_PATH=os.path.join(work, "synthetic"))
    cmd = [sys.executable, "-m", "pytest", os.path.join(sam_dir, "sam/sim/test", test), "-p", "no:cacheprovider",
           "--ssname", SSNAME, "--synth", "--check-gold", "-s", "-q", "--benchmark-json", out]
    try:
        p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"SAM's test ran past {timeout} s"
    with open(os.path.join(work, "sam.log"), "w") as f:
        f.write(p.stdout + p.stderr)
    if p.returncode != 0:
        last = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()][-1:]
        return None, f"SAM's test failed (exit {p.returncode}: {' '.join(last)}; log {work}/sam.log)"
    if "Checking gold" not in p.stdout and "elemmul" not in test:  # the elemmul test checks unasked
        return None, "SAM's test did not check its output"
    benches = json.load(open(out))["benchmarks"] if os.path.exists(out) else []
    if not benches:
        return None, "SAM's test was skipped (no benchmark recorded)"
    return int(benches[0]["extra_info"]["cycles"]), None


def run_kernel(name, args, sam_dir):
    test, order, formats, make, small = KERNELS[name]
    n = args.small if small else args.size
    if not os.path.exists(os.path.join(sam_dir, "sam/sim/test", test.split("::")[0])):
        return {"kernel": name, "skipped": f"this SAM checkout has no sam/sim/test/{test.split('::')[0]}"}
    work = tempfile.mkdtemp(prefix=f"sam_agreement_{name}_")
    sam = {k: os.path.join(work, k) for k in ("formatted", "synthetic", "mtx")}
    os.makedirs(sam["mtx"])
    text, inputs = make(sam, np.random.default_rng(args.seed), n, args.density)
    shape = "x".join(str(e) for e in inputs[next(iter(inputs))].shape)
    row = {"kernel": name, "order": order, "formats": formats, "shape": shape, "density": args.density,
           "sam_test": test, "work": work}
    t = time.time()
    try:
        r = fuseflow.simulate(fuseflow.from_mlir(text), f"full order={order}", inputs)
    except fuseflow.FuseflowError as e:
        return dict(row, skipped=f"fuseflow: {e}")
    if not r.verified:
        return dict(row, skipped="fuseflow's output was not verified")
    row.update(fuseflow_cycles=int(r.cycles), fuseflow_seconds=round(time.time() - t, 1))
    t = time.time()
    cycles, why = run_sam(sam_dir, test, work, args.timeout)
    row.update(sam_seconds=round(time.time() - t, 1))
    print(f"{name}: {shape}, fuseflow {row['fuseflow_seconds']} s, SAM {row['sam_seconds']} s", file=sys.stderr)
    if why:
        return dict(row, skipped=why)
    if not args.keep:
        shutil.rmtree(work)
        row.pop("work")
    return dict(row, sam_cycles=cycles, ratio=round(row["fuseflow_cycles"] / cycles, 4))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sam", required=True, help="a checkout of SAM (github.com/weiya711/sam)")
    ap.add_argument("--size", type=int, default=500, help="matrix size (default 500)")
    ap.add_argument("--small", type=int, default=200, help="matrix size for spmm_ijk and sddmm (default 200)")
    ap.add_argument("--density", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--timeout", type=int, default=900, help="seconds allowed to one SAM test (default 900)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    ap.add_argument("--keep", action="store_true", help="keep every kernel's folder of SAM files and logs")
    args = ap.parse_args(argv)
    sam_dir = os.path.abspath(args.sam)
    if not os.path.isdir(os.path.join(sam_dir, "sam/sim/test")):
        ap.error(f"{sam_dir} is not a SAM checkout (no sam/sim/test)")
    missing = [m for m in ("pytest_benchmark", "sparse", "matplotlib") if importlib.util.find_spec(m) is None]
    if missing:
        ap.error(f"SAM's tests need {', '.join(missing)} here (pip install pytest-benchmark sparse matplotlib)")
    names = [k for k in args.kernels.split(",") if k]
    rows = [{"kernel": k, "skipped": f"unknown kernel (known: {', '.join(KERNELS)})"} for k in names
            if k not in KERNELS]
    for k in (k for k in names if k in KERNELS):
        rows.append(run_kernel(k, args, sam_dir))
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    cols = ("kernel", "order", "formats", "shape", "SAM cycles", "fuseflow cycles", "ratio")
    table = [cols] + [(r["kernel"], r["order"], r["formats"], r["shape"],
                       f"{r['sam_cycles']:,}", f"{r['fuseflow_cycles']:,}", f"{r['ratio']:.4f}")
                      for r in rows if "skipped" not in r]
    w = [max(len(t[c]) for t in table) for c in range(len(cols))]
    for t in table:
        print("  ".join(s.ljust(w[c]) if c < 4 else s.rjust(w[c]) for c, s in enumerate(t)))
    print(f"density {args.density}, seed {args.seed}; ratio = fuseflow / SAM")
    for r in rows:
        if "skipped" in r:
            print(f"skipped {r['kernel']}: {r['skipped']}")


if __name__ == "__main__":
    main()
