"""Parallelization (`par=VAR:P`): fork/join lanes give the reference outputs, both engines agree
token for token and cycle for cycle, and work-dominated loops get faster with more lanes."""
import itertools
import os

import numpy as np
import pytest

import fuseflow
from fuseflow.cli import main
from fuseflow.errors import UserError
from fuseflow.execute import execute
from fuseflow.fusion.compile import compile_schedule
from fuseflow.fusion.nesting import valid_orders
from fuseflow.sam.parallel import parallel_region, stream_vars
from fuseflow.schedule.schedule import Schedule
from fuseflow.sim import fast, oracle

from lowering_cases import MLIR_FILES, close, load, schedules, torch_programs, with_gold

MLIR = os.path.join(os.path.dirname(__file__), "mlir")
PROGRAMS = ["spmv.mlir", "spmm_ikj.mlir", "sddmm.mlir", "sddmm_masked.mlir", "masked_softmax.mlir",
            "matmul_chain.mlir", "softmax_sparse.mlir", "shared_filter.mlir"]


def pars_of(order: list[str]) -> list[str]:
    """One level on each variable with P = 2, 3, 4 in turn, and every outer/inner pair at 2 x 3."""
    one = [f"{v}:{2 + k % 3}" for k, v in enumerate(order)]
    two = [f"{a}:2,{b}:3" for a, b in itertools.combinations(order, 2)]
    return one + two


def check_engines(program, shapes, data, gold, schedule):
    """Compile `schedule`, run both engines, require identical results that match the reference."""
    compiled = compile_schedule(program, schedule, shapes)
    for kernel in compiled.kernels:
        if kernel.graph is not None:
            kernel.graph.verify()
            kernel.graph.verify_single_consumers()
    slow = execute(compiled, data, run_graph_fn=oracle.run_graph)
    quick = execute(compiled, data, run_graph_fn=fast.run_graph)
    assert slow.cycles == quick.cycles, schedule
    assert [k.counters for k in slow.kernels] == [k.counters for k in quick.kernels], schedule
    for name in program.outputs:
        assert np.array_equal(slow.outputs[name], quick.outputs[name], equal_nan=True), schedule
        assert close(slow.outputs[name], gold[name]), f"{schedule}: {name} differs from the reference"
    return compiled, slow


CASES = [(os.path.join(MLIR, f), s) for f in PROGRAMS for s in schedules(*load(os.path.join(MLIR, f)))[:2]]


@pytest.mark.slow
@pytest.mark.parametrize("path, schedule", CASES, ids=[f"{os.path.basename(p)}-{s}" for p, s in CASES])
def test_lanes_match_reference_and_engines_agree(path, schedule):
    program, shapes, data, gold = with_gold(path, seed=5)
    base = compile_schedule(program, schedule, shapes)
    checked = 0
    for kernel in base.kernels:
        if kernel.graph is None:
            continue
        for par in pars_of(kernel.order):
            item = "par=" if kernel.index == 0 else f"par.{kernel.index}="
            compiled, _ = check_engines(program, shapes, data, gold, f"{schedule} {item}{par}")
            lanes = compiled.kernels[kernel.index].graph
            # a one-level par either replicated something (forks feed the lanes) or found no body
            assert lanes.count("fork") > 0 or not parallel_region(kernel.graph, par.split(":")[0])
            checked += 1
    assert checked >= 2


@pytest.mark.slow
def test_other_orders_with_lanes():
    """Every order of SpMM (inputs laid out to match, so all 6 are valid) with each variable
    parallelized over 3 lanes."""
    program, shapes, data, gold = with_gold(os.path.join(MLIR, "spmm_ikj.mlir"), seed=2)
    region = compile_schedule(program, "full layout=induced", shapes).kernels[0].region
    orders = list(valid_orders(region))
    assert len(orders) == 6
    for order in orders:
        for v in order:
            check_engines(program, shapes, data, gold, f"full layout=induced order={','.join(order)} par={v}:3")


@pytest.fixture(scope="module")
def torch_cases():
    return torch_programs()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gcn", "attention"])
def test_models_with_lanes(name, torch_cases):
    program, data = torch_cases[name]
    gold = fuseflow.reference(program, data)
    for schedule in ("unfused", "full"):
        base = compile_schedule(program, schedule)
        for kernel in base.kernels:
            if kernel.graph is None:
                continue
            order = kernel.order
            item = "par=" if kernel.index == 0 else f"par.{kernel.index}="
            levels = [f"{order[0]}:4"] + ([f"{order[0]}:2,{order[1]}:2"] if len(order) > 1 else [])
            for par in levels:
                check_engines(program, None, data, gold, f"{schedule} {item}{par}")


def cycles(schedule: str, seed: int = 3) -> int:
    program, shapes, data, gold = with_gold(os.path.join(MLIR, "spmv.mlir"), seed=seed)
    return check_engines(program, shapes, data, gold, schedule)[1].cycles


def test_row_parallel_spmv_scales():
    """SpMV (64 x 48, 30 % dense) in order i,j: each row's work is its j fiber (~14 products, each
    through a scan, an intersection with x, two lookups, a multiply and a reduce step), while the
    fork and the join handle one token per row. Dealing rows over P lanes should divide the time by
    about P; require at least 80 % of linear."""
    base = cycles("full order=i,j")
    for lanes in (2, 3, 4):
        assert cycles(f"full order=i,j par=i:{lanes}") * lanes < base / 0.8
    assert cycles("full order=i,j par=i:1") == base  # one lane is the plain graph


def test_inner_parallel_of_a_reduction_does_not_speed_up():
    """Parallelizing the reduced inner variable j of SpMV: the intersection at j decides the
    coordinates and the reduction runs after the join, so both handle every j token serially; the
    lanes cannot beat the unparallelized graph."""
    assert cycles("full order=i,j par=j:4") >= cycles("full order=i,j")


def test_region_keeps_coordinate_deciders_and_drops_serial():
    """SDDMM with a compressed output, parallel at i: the scans at i and the crd_drop whose outer
    level is i (it removes whole i elements) stay outside the lanes."""
    program, shapes = load(os.path.join(MLIR, "sddmm.mlir"))
    graph = compile_schedule(program, "full", shapes).kernels[0].graph
    v = compile_schedule(program, "full", shapes).kernels[0].order[0]
    region = parallel_region(graph, v)
    vars_of = stream_vars(graph)
    for node in graph.nodes:
        if node.kind == "scan" and node.var == v:
            assert node.id not in region
        if node.kind == "crd_drop" and vars_of[node.inputs["outer"]][-1] == v:
            assert node.id not in region
        if node.kind in ("level_write", "value_write", "root"):
            assert node.id not in region
    assert any(graph.nodes[n].kind == "alu" for n in region)


def test_schedule_round_trip():
    s = Schedule.parse("unfused par=i:4,j:2 par.2=k:3")
    assert s.pars == {0: [("i", 4), ("j", 2)], 2: [("k", 3)]}
    assert Schedule.parse(str(s)).pars == s.pars and str(Schedule.parse(str(s))) == str(s)


@pytest.mark.parametrize("schedule, needle", [
    ("full par=i:0", "cannot read 'i:0'"),
    ("full par=i", "cannot read 'i'"),
    ("full par=i:2,j:2,k:2", "one or two different variables"),
    ("full par=q:2", "names 'q', which group 0 does not iterate"),
    ("full order=i,j par=j:2,i:2", "lists the inner variable first"),
    ("full par.4=i:2", "par given for group 4"),
    ("full par.x=i:2", "bad group number"),
])
def test_bad_par_is_a_user_error(schedule, needle, capsys):
    program, _ = load(os.path.join(MLIR, "spmv.mlir"))
    with pytest.raises(UserError, match=needle):
        compile_schedule(program, schedule)
    assert main(["simulate", os.path.join(MLIR, "spmv.mlir"), "--schedule", schedule]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and needle in err


def test_all_mlir_files_are_known():
    """The programs above are a subset of tests/mlir: keep the list in step with the directory."""
    names = {os.path.basename(p) for p in MLIR_FILES}
    assert set(PROGRAMS) <= names


ELEMENTWISE_DCSR = """
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @emul(%A: tensor<8x8xf32, #DCSR>, %B: tensor<8x8xf32, #DCSR>) -> tensor<8x8xf32> {
  %e = tensor.empty() : tensor<8x8xf32>
  %X = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%A, %B : tensor<8x8xf32, #DCSR>, tensor<8x8xf32, #DCSR>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  return %X : tensor<8x8xf32>
}
"""


def test_emptied_rows_are_dropped_after_the_join(tmp_path):
    """A ∘ B with both DCSR: rows present in both but with disjoint columns come out empty and
    the crd_drop removes them. Inside a lane that would remove a whole dealt row and the join
    would pair the wrong rows, so the drop must run after the join."""
    path = tmp_path / "emul.mlir"
    path.write_text(ELEMENTWISE_DCSR)
    program = fuseflow.from_mlir(str(path))
    rng = np.random.default_rng(0)
    A = np.where(rng.random((8, 8)) < 0.4, rng.random((8, 8)), 0.0)
    B = np.where(rng.random((8, 8)) < 0.4, rng.random((8, 8)), 0.0)
    for r in (1, 2, 5):  # rows in both inputs whose products are all zero
        A[r], B[r] = 0.0, 0.0
        A[r, r], B[r, (r + 1) % 8] = 1.0, 1.0
    data = {"A": A, "B": B}
    gold = fuseflow.reference(program, data)
    base = compile_schedule(program, "full").kernels[0].graph
    assert base.count("crd_drop") == 1
    for par in ("i:2", "i:3", "i:4", "i:2,j:2"):
        compiled, _ = check_engines(program, None, data, gold, f"full par={par}")
        assert compiled.kernels[0].graph.count("crd_drop") == 1


def test_heuristic_divides_the_parallel_body():
    """SpMV rows over P lanes: the estimate's busiest nodes live in the j loop, so it drops about
    P-fold at i; the i-level scan and the writers stay serial, so a j-level par changes nothing."""
    from fuseflow.fusion.estimate import estimate

    program, _ = load(os.path.join(MLIR, "spmv.mlir"))
    base = estimate(program, "full order=i,j").cycles
    assert estimate(program, "full order=i,j par=i:4").cycles < base / 3
    assert estimate(program, "full order=i,j par=j:4").cycles == base


def test_sweep_varies_par(tmp_path):
    db = tmp_path / "par.db"
    assert main(["sweep", os.path.join(MLIR, "spmv.mlir"), "-g", "full order=i,j", "--par", "1",
                 "--par", "i:2", "--db", str(db), "-q"]) == 0
    import sqlite3

    rows = dict(sqlite3.connect(db).execute("select schedule, cycles from runs").fetchall())
    assert set(rows) == {"full order=i,j", "full order=i,j par=i:2"}
    assert rows["full order=i,j par=i:2"] < rows["full order=i,j"]
