"""Run SAM's own generated tests on our `--emit sam-gv` export: every kernel of every test program,
gold-checked, SAM's cycles beside fuseflow's on the same data.

    python bench/sam_export_check.py --sam DIR [--programs tests/mlir/spmv.mlir,...]
        [--presets unfused,partial,full,"full layout=induced"] [--density 0.3 --seed 3]
        [--python PY] [--timeout 600] [--json] [--keep DIR]

DIR is a checkout of SAM (github.com/weiya711/sam; it is not on PyPI). SAM's generator and tests
run in PY (default: this Python), which must have what they import: pydot, networkx, pytest,
pytest-benchmark, sparse, scipy, matplotlib (a throwaway venv). fuseflow runs in this Python.

For each program (tests/mlir/*.mlir unless --programs) and preset, the script compiles the
schedule, draws seeded inputs whose stored values are whole numbers 1..9 (so both sides are
exact), and simulates the program with fuseflow (every output checked against the numpy
reference), keeping each kernel's cycles. Then, for each kernel, in a fresh copy of SAM:

1. `to_samgv` writes the kernel in SAM's simulator form, or refuses it with the reason (the row
   says `refused`);
2. SAM's generator (`scripts/gen_sam_apps/test_generating_code.py`) turns the `.gv` into a
   pytest file; it is named as SAM's app `mat_elemmul` (the generator takes its data-set fixture
   from its list of apps) and reads its input tensors from `<formatted>/<ssname>/mat_elemmul/`,
   where the script writes them in SAM's tensor files (numbered by dimension; the reference's
   value for a tensor an earlier kernel wrote);
3. the generated test runs with `--check-gold`; its gold call, which in SAM recomputes one of
   SAM's own apps from a SuiteSparse matrix, is pointed at fuseflow's numpy reference for this
   kernel and compared with SAM's own point-list check (`sam.sim.test.test.check_point_tuple`);
4. the row records SAM's cycles (`extra_info["cycles"]` of the benchmark json) beside the
   kernel's fuseflow cycles, or the first error SAM's test printed.

Both sides run with unbounded channels (SAM without `--back`, fuseflow's default HwConfig).
Not a test: pytest does not collect bench/.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass

import numpy as np
import scipy.sparse as sp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))
os.environ.setdefault("FUSEFLOW_WORKER", "0")
import fuseflow  # noqa: E402
from fuseflow.errors import FuseflowError  # noqa: E402
from fuseflow.fusion.compile import compile_schedule  # noqa: E402
from fuseflow.interop import write_tensor_files  # noqa: E402
from fuseflow.ir.formats import TensorFormat  # noqa: E402
from fuseflow.ir.reference import bind_inputs, reference  # noqa: E402
from fuseflow.sam.samgv import NotInSam, to_samgv  # noqa: E402
from fuseflow.sim.storage import StoredTensor  # noqa: E402

APP = "mat_elemmul"   # a name from SAM's generator's list of apps: the test gets the ssname fixture
SSNAME = "fuseflow"
PRESETS = ("unfused", "partial", "full", "full layout=induced")
SHAPES = {"dynamic.mlir": {"A": (6, 8)}}
GOLD = '''"""fuseflow's reference for the kernel, checked with SAM's own point-list comparison."""
import numpy as np
from sam.sim.test.test import check_point_tuple, convert_ndarr_point_tuple, convert_point_tuple, \\
    get_point_list, remove_zeros


def check_gold_fuseflow(out_crds, out_segs, out_vals, out_format):
    gold = np.load({path!r})
    if gold.ndim == 0:
        assert len(out_vals) == 1 and abs(out_vals[0] - gold) <= 1e-12 * max(1.0, abs(gold)), (out_vals, gold)
        print("fuseflow gold: the scalar matches")
        return
    gold_tup = convert_ndarr_point_tuple(gold)
    if not gold_tup:
        assert all(v == 0 for v in out_vals), out_vals
    else:
        out_tup = remove_zeros(convert_point_tuple(get_point_list(out_crds, out_segs, out_vals)))
        assert check_point_tuple(out_tup, gold_tup), "SAM's output differs from fuseflow's reference"
    print("fuseflow gold:", len(gold_tup), "points match")
'''


@dataclass
class Row:
    program: str
    preset: str
    kernel: str
    status: str              # runs, refused, failed, not simulated (fuseflow refused the program or its data)
    sam_cycles: int | None = None
    fuseflow_cycles: int | None = None
    why: str = ""

    @property
    def ratio(self) -> str:
        return f"{self.fuseflow_cycles / self.sam_cycles:.3f}" if self.sam_cycles and self.fuseflow_cycles else ""


def whole_inputs(program, density: float, seed: int, shapes) -> dict:
    """Seeded inputs whose stored values are whole numbers 1..9 (sums and products stay exact)."""
    rng = np.random.default_rng(seed)
    data = fuseflow.random_inputs(program, density=density, seed=seed, shapes=shapes)
    for name, value in data.items():
        if sp.issparse(value):
            value = value.copy()
            value.data = rng.integers(1, 10, value.data.size).astype(value.dtype)
        else:
            value = np.where(value != 0, rng.integers(1, 10, value.shape), 0).astype(value.dtype)
        data[name] = value
    return data


def write_inputs(text: str, graph, values: dict, where: str) -> None:
    """SAM's tensor files of every tensor the `.gv` reads, under its one-letter SAM name; a dense
    level the `.gv` reads as compressed (`sam.samgv.full_levels`) gets seg and crd files that list
    every coordinate of every fiber."""
    names = dict(x.split("=", 1) for x in re.search(r'names="([^"]*)"', text).group(1).split())
    formats = dict(x.split("=", 1) for x in re.search(r'comment="([^"]*)"', text).group(1).split(","))
    os.makedirs(where, exist_ok=True)
    for sam, storage in names.items():
        meta = graph.tensors[storage]
        if meta.role != "input":
            continue
        stored = StoredTensor.from_dense(values[meta.stores(storage)], TensorFormat.of(meta), meta.fill)
        write_tensor_files(stored, sam, where)
        fibers = 1  # positions of the level above
        for k, level in enumerate(stored.levels):
            if not level.is_compressed and formats[sam][k] == "s":
                m = meta.mode_order[k]
                np.savetxt(os.path.join(where, f"tensor_{sam}_mode_{m}_seg"), np.arange(fibers + 1) * level.dim, "%d")
                np.savetxt(os.path.join(where, f"tensor_{sam}_mode_{m}_crd"), np.tile(np.arange(level.dim), fibers),
                           "%d")
            fibers = len(level.crd) if level.is_compressed else fibers * level.dim
        crd1 = os.path.join(where, f"tensor_{sam}_mode_1_crd")
        if os.path.exists(crd1):  # the name SAM's generator reads a `ds01` tensor's crd from
            shutil.copy(crd1, os.path.join(where, f"tensor_{sam}_dirnametensor_{sam}_mode_1_crd"))


def gold_array(text: str, graph, values: dict) -> np.ndarray:
    """The kernel's output from the reference, its axes in stored level order (as SAM writes it),
    without the unit dimensions the `.gv` writes no level of."""
    name, meta = next((n, m) for n, m in graph.tensors.items() if m.role == "output")
    dense = np.asarray(values[meta.stores(name)], dtype=np.float64)
    written = {int(m) for m in re.findall(r'type="fiberwrite"[^\]]* mode="(\d+)"', text)}
    dense = dense.transpose(meta.mode_order) if dense.ndim > 1 else dense
    unwritten = tuple(k for k, m in enumerate(meta.mode_order) if m not in written and dense.shape[k] == 1)
    return dense.squeeze(unwritten) if unwritten else dense


def run_sam(python: str, sam_copy: str, text: str, graph, values: dict, work: str,
            timeout: int) -> tuple[int | None, str]:
    """Generates SAM's test from `text` and runs it: (cycles, "") or (None, why)."""
    gvdir, data = os.path.join(work, "gv"), os.path.join(work, "formatted", SSNAME, APP)
    shutil.rmtree(gvdir, ignore_errors=True)
    os.makedirs(gvdir)
    with open(os.path.join(gvdir, APP + ".gv"), "w") as handle:
        handle.write(text)
    test = os.path.join(sam_copy, "sam/sim/test/apps", f"test_{APP}.py")
    if os.path.exists(test):
        os.remove(test)
    gen = subprocess.run([python, "scripts/gen_sam_apps/test_generating_code.py", "--input_dir", gvdir],
                         cwd=sam_copy, capture_output=True, text=True, timeout=timeout)
    if not os.path.exists(test):
        last = [ln for ln in (gen.stdout + gen.stderr).splitlines() if ln.strip()][-1:]
        return None, f"SAM's generator wrote no test ({' '.join(last)})"
    shutil.rmtree(os.path.join(work, "formatted"), ignore_errors=True)
    write_inputs(text, graph, values, data)
    gold = os.path.join(work, "gold.npy")
    np.save(gold, gold_array(text, graph, values))
    with open(os.path.join(work, "fuseflow_gold.py"), "w") as handle:
        handle.write(GOLD.format(path=gold))
    source = open(test).read()
    source = re.sub(r"check_gold_\w+\(ssname, debug_sim, cast, ", "check_gold_fuseflow(", source)
    source = source.replace("import pytest\n", "import pytest\nfrom fuseflow_gold import check_gold_fuseflow\n", 1)
    with open(test, "w") as handle:
        handle.write(source)
    shutil.copy(test, os.path.join(work, f"test_{APP}.py"))
    out = os.path.join(work, "bench.json")
    if os.path.exists(out):
        os.remove(out)
    env = dict(os.environ, CI="false", PYTHONPATH=f"{sam_copy}{os.pathsep}{work}", MPLBACKEND="Agg",
               SUITESPARSE_FORMATTED_PATH=os.path.join(work, "formatted"))
    cmd = [python, "-m", "pytest", test, "-p", "no:cacheprovider", "--ssname", SSNAME, "--check-gold",
           "-s", "-q", "--benchmark-json", out]
    try:
        p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"SAM's test ran past {timeout} s"
    log = p.stdout + p.stderr
    with open(os.path.join(work, "sam.log"), "w") as handle:
        handle.write(log)
    if p.returncode != 0:
        errors = [ln.strip() for ln in log.splitlines() if ln.startswith("E ")]
        last = errors[-1:] or [ln for ln in log.splitlines() if ln.strip()][-1:]
        return None, f"SAM's test failed: {' '.join(last)[:200]}"
    if "fuseflow gold:" not in log:
        return None, "SAM's test did not check its output"
    benches = json.load(open(out))["benchmarks"] if os.path.exists(out) else []
    if not benches:
        return None, "SAM's test recorded no cycles"
    return int(benches[0]["extra_info"]["cycles"]), ""


def check_program(path: str, preset: str, args, sam_copy: str, work: str) -> list[Row]:
    name = os.path.basename(path)
    program = fuseflow.from_mlir(path)
    shapes = SHAPES.get(name)
    try:
        compiled = compile_schedule(program, preset, shapes)
        inputs = whole_inputs(program, args.density, args.seed, shapes)
        result = fuseflow.simulate(program, compiled, inputs)
    except FuseflowError as err:
        return [Row(name, preset, "", "not simulated", why=str(err).splitlines()[0])]
    canonical = compiled.program  # its helper ops too (`Y_r`: a reduction's sum before its start is added)
    bound = bind_inputs(canonical, {n: v for n, v in inputs.items() if n in canonical.inputs})
    values = {**bound, **reference(canonical, bound, keep_intermediates=True)}
    cycles = {k.index: int(k.cycles) for k in result.kernels}
    rows = []
    for kernel in compiled.kernels:
        if kernel.is_reshape:
            continue
        row = Row(name, preset, f"k{kernel.index}", "refused", fuseflow_cycles=cycles.get(kernel.index))
        try:
            text = to_samgv(kernel.graph)
        except NotInSam as why:
            row.why = str(why)
            rows.append(row)
            continue
        row.sam_cycles, row.why = run_sam(args.python, sam_copy, text, kernel.graph, values, work, args.timeout)
        row.status = "runs" if row.sam_cycles is not None else "failed"
        if args.keep:
            keep = os.path.join(args.keep, f"{name}_{preset.replace(' ', '_')}_{row.kernel}")
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(work, keep, ignore=shutil.ignore_patterns("sam"))
        print(f"{name} {preset} {row.kernel}: {row.status} {row.sam_cycles or ''} {row.why}", file=sys.stderr)
        rows.append(row)
    return rows


OPTIONS = (  # flag, default, help
    ("--programs", "", "comma-separated .mlir files (default tests/mlir/*.mlir)"),
    ("--presets", ",".join(PRESETS), "comma-separated presets"),
    ("--python", sys.executable, "the Python SAM's generator and tests run in"),
    ("--density", 0.3, "share of stored entries of sparse inputs"),
    ("--seed", 3, "seed of the inputs"),
    ("--timeout", 600, "seconds allowed to one SAM test"),
    ("--keep", "", "a folder to keep each kernel's .gv, test, data and log in"),
)


def sam_problem(sam_dir: str, python: str) -> str | None:
    """Why `sam_dir` and `python` cannot run SAM's generator and tests (None when they can)."""
    if not os.path.isfile(os.path.join(sam_dir, "scripts/gen_sam_apps/test_generating_code.py")):
        return f"{sam_dir} is not a SAM checkout (no scripts/gen_sam_apps/test_generating_code.py)"
    probe = "import importlib.util as u; print(' '.join(m for m in %r if u.find_spec(m) is None))" % (
        ("pydot", "networkx", "pytest_benchmark", "sparse", "matplotlib"),)
    missing = subprocess.run([python, "-c", probe], capture_output=True, text=True).stdout.split()
    return f"SAM's generator and tests need {', '.join(missing)} in {python}" if missing else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sam", required=True, help="a checkout of SAM (github.com/weiya711/sam)")
    for flag, default, say in OPTIONS:
        ap.add_argument(flag, type=type(default), default=default, help=say)
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    args = ap.parse_args(argv)
    sam_dir = os.path.abspath(args.sam)
    problem = sam_problem(sam_dir, args.python)
    if problem:
        ap.error(problem)
    programs = [p for p in args.programs.split(",") if p] or sorted(glob.glob(os.path.join(ROOT, "tests/mlir/*.mlir")))
    work = tempfile.mkdtemp(prefix="sam_export_check_")
    sam_copy = os.path.join(work, "sam")
    shutil.copytree(sam_dir, sam_copy, ignore=shutil.ignore_patterns(".git"))
    os.makedirs(os.path.join(sam_copy, "sam/sim/test/apps"), exist_ok=True)
    rows = []
    for path in programs:
        for preset in [p for p in args.presets.split(",") if p]:
            rows += check_program(path, preset, args, sam_copy, work)
    shutil.rmtree(work)
    if args.json:
        print(json.dumps([dict(asdict(r), ratio=r.ratio) for r in rows], indent=1))
        return
    print("| program | preset | kernel | SAM | SAM cycles | fuseflow cycles | fuseflow/SAM | why not |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.program} | {r.preset} | {r.kernel} | {r.status} | {r.sam_cycles or ''} | "
              f"{r.fuseflow_cycles or ''} | {r.ratio} | {r.why.replace('|', '/')} |")
    runs = sum(r.status == "runs" for r in rows)
    print(f"\n{runs} of {len(rows)} kernels run in SAM's simulator and match the reference; "
          f"density {args.density}, seed {args.seed}")


if __name__ == "__main__":
    main()
