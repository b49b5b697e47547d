"""A default that always works: the order search finds a valid order or proves none exists and
says why; without a schedule the compiler picks one that compiles; `fuseflow orders` counts,
streams and limits its list, numbered as `order.N=#k` picks."""
import itertools
import time

import numpy as np
import pytest

import fuseflow
from fuseflow.cli import main
from fuseflow.frontend import from_mlir
from fuseflow.fusion.compile import compile_schedule
from fuseflow.fusion.cost import ACCUMULATOR_CAPACITY, nest_cost, spilled_cost
from fuseflow.fusion.nesting import Nesting, OrderWalk, count_orders, topological_orders, valid_orders
from fuseflow.fusion.region import Region
from fuseflow.fusion.search import NoValidOrder, default_order
from fuseflow.ir.canonicalize import prepare
from fuseflow.pipeline import simulate

from fuzz_programs import RandomChooser, RandomProgram, Step, Value, random_program

CSR_TIMES_CSC = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#CSC = #sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed) }>
func.func @f(%a: tensor<4x5xf32, #CSR>, %b: tensor<4x5xf32, #CSC>) -> tensor<4x5xf32> {
  %e = tensor.empty() : tensor<4x5xf32>
  %r = linalg.mul ins(%a, %b : tensor<4x5xf32, #CSR>, tensor<4x5xf32, #CSC>)
                  outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  return %r : tensor<4x5xf32>
}"""



def softmax_of_csc() -> str:
    """A row softmax of a CSC matrix (max, exp of the difference, sum, divide), fully fused: each
    row's sum must be complete before its divisions, in a loop nest whose outer loop runs over
    columns (fuzz program 3, reduced)."""
    a = Value("a0", (5, 4), "csc")
    out = Value("t0", (5, 4))
    return RandomProgram([a], [Step("softmax", (a,), out)], [out]).mlir()


SOFTMAX_OF_CSC = softmax_of_csc()


def test_conflicting_storage_orders_are_proven_and_induced_layouts_offered():
    program = fuseflow.from_mlir(CSR_TIMES_CSC)
    with pytest.raises(NoValidOrder) as err:
        compile_schedule(program, "full")
    text = str(err.value)
    assert "the storage orders conflict: a(i,j) stores i before j; b(i,j) stores j before i" in text
    assert "compiles with layout=induced" in text and err.value.induced is not None
    assert str(err.value.induced.schedule) == "full layout=induced"


def test_nesting_rules_that_leave_no_order_are_proven_with_the_smallest_part():
    """The division needs each row's sum before it, which no order gives with the columns
    outermost: the part of the region made of the sum and the division alone shows it."""
    program = fuseflow.from_mlir(SOFTMAX_OF_CSC)
    with pytest.raises(NoValidOrder, match="its part t0_sum,t0 alone has no valid order: no order of i,j is "
                       "supported, e.g. j,i: the values of t0_sum would have to be replayed inside j for t0"):
        compile_schedule(program, "full")


@pytest.mark.parametrize("text", [CSR_TIMES_CSC, SOFTMAX_OF_CSC])
def test_without_a_schedule_the_compiler_picks_one_that_compiles(text):
    program = fuseflow.from_mlir(text)
    data = fuseflow.random_inputs(program, density=0.5, seed=1)
    result = simulate(program, None, data)
    assert result.verified and result.schedule == "full layout=induced"


def test_the_cli_defaults_to_a_schedule_that_compiles(tmp_path, capsys):
    path = tmp_path / "mul.mlir"
    path.write_text(CSR_TIMES_CSC)
    assert main(["simulate", str(path)]) == 0
    assert "schedule: full layout=induced" in capsys.readouterr().out
    assert main(["simulate", str(path), "--schedule", "full"]) == 2
    assert "fix: the schedule compiles with layout=induced" in capsys.readouterr().err


def test_the_walk_lists_what_checking_every_order_lists():
    """Pruning prefixes that `Nesting(partial=True)` rejects loses no valid order: on the regions
    of 60 random programs (every group of full and unfused, both layouts) the walk lists exactly
    the topological orders that a full `Nesting` accepts, in the same sequence."""
    checked = 0
    for seed in range(60):
        program = fuseflow.from_mlir(random_program(RandomChooser(seed)).mlir())
        for schedule in ("full layout=induced", "unfused"):
            try:
                compiled = compile_schedule(program, schedule)
            except fuseflow.FuseflowError:
                continue
            for kernel in compiled.kernels:
                region = kernel.listed_region()
                if region is None or count_orders(region) > 5000:
                    continue
                every = [o for o in topological_orders(region) if Nesting(region, o).valid]
                assert list(valid_orders(region)) == every, (seed, schedule, kernel.index)
                checked += 1
    assert checked > 50


def test_order_indices_pick_what_orders_lists(capsys):
    path = "tests/mlir/matmul_chain.mlir"
    assert main(["orders", path, "--limit", "0"]) == 0
    listed = [line.split()[1] for line in capsys.readouterr().out.splitlines() if line.strip().startswith("#")]
    program = fuseflow.from_mlir(path)
    for k, order in enumerate(listed):
        assert compile_schedule(program, f"full order=#{k}").kernels[0].order == order.split(",")


def test_orders_counts_first_streams_and_stops_at_the_limit(tmp_path, capsys):
    """A fused group of ten variables (3,628,800 orders; fuzz program 84 of seed 0): the count
    comes first and the listing stops at --limit, within seconds."""
    path = tmp_path / "p84.mlir"
    path.write_text(random_program(RandomChooser(84)).mlir())
    start = time.perf_counter()
    assert main(["orders", str(path), "--schedule", "full layout=induced", "--limit", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert time.perf_counter() - start < 30
    assert "3,628,800 respect the storage orders" in lines[0]
    assert [line.split()[0] for line in lines[1:]] == ["#0", "#1", "#2", "..."]


def test_a_proof_walk_within_its_work_says_so():
    region = compile_schedule(fuseflow.from_mlir(SOFTMAX_OF_CSC), "full layout=induced").kernels[0].listed_region()
    walk = OrderWalk(region, work=1)
    assert list(itertools.islice(walk.orders(), 5)) == [] and not walk.finished
    assert OrderWalk(region).first() is not None


def test_study_runs_a_preset_without_a_valid_order_with_induced_layouts():
    from fuseflow.models.registry import ModelCase
    from fuseflow.studies.granularity import fusion_study

    program = prepare(fuseflow.from_mlir(CSR_TIMES_CSC))
    data = fuseflow.random_inputs(program, density=0.5, seed=2)
    case = ModelCase("mul", "random", program, data)
    case.presets = {"unfused": "unfused", "full": "full"}
    rows = fusion_study(case, ["unfused", "full"], engine="oracle")
    assert [r.schedule_text for r in rows] == ["unfused layout=induced", "full layout=induced"]
    assert all(r.verified for r in rows)
    assert np.isclose(rows[1].speedup, rows[0].cycles / rows[1].cycles)


def test_prefix_rejections_hold_for_every_extension():
    """What lets walks and searches drop a prefix: a prefix `Nesting(partial=True)` rejects
    (including an accumulator or buffered read whose producer still has a loop to place) starts
    no valid order. Checked on every prefix of the regions of 40 random programs (all orders of
    up to six variables)."""
    checked = 0
    for seed in range(40):
        program = fuseflow.from_mlir(random_program(RandomChooser(1000 + seed)).mlir())
        for schedule in ("full layout=induced", "full", "unfused"):
            try:
                compiled = compile_schedule(program, schedule)
            except fuseflow.FuseflowError:
                continue
            for kernel in compiled.kernels:
                region = kernel.region
                if region is None or len(region.vars) > 6:
                    continue
                orders = list(topological_orders(region))
                valid = {tuple(o) for o in orders if Nesting(region, o).valid}
                prefixes = {tuple(o[:k]) for o in orders for k in range(1, len(o))}
                for prefix in prefixes:
                    if not Nesting(region, list(prefix), partial=True).valid:
                        assert not any(o[:len(prefix)] == prefix for o in valid), (seed, schedule, prefix)
                        checked += 1
    assert checked > 100


MATMUL = """func.func @mm(%A: tensor<{n}x16xf32>, %W: tensor<16x349xf32>) -> tensor<{n}x349xf32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{n}x349xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<{n}x349xf32>) -> tensor<{n}x349xf32>
  %T = linalg.matmul ins(%A, %W : tensor<{n}x16xf32>, tensor<16x349xf32>)
                     outs(%f : tensor<{n}x349xf32>) -> tensor<{n}x349xf32>
  return %T : tensor<{n}x349xf32>
}}"""


@pytest.mark.parametrize("rows", [20, 736389])
def test_an_accumulator_beyond_the_chip_is_not_the_default(tmp_path, rows):
    """Dense T(i,j) = sum[k] A(i,k) W(k,j): in order k,i,j an order-2 accumulator holds all of T
    as partial sums, in j,k,i an order-1 one a column of it per j. Over 736,389 rows (beyond
    `ACCUMULATOR_CAPACITY`) both orders cost every partial sum once more, so the default order
    holds a row (i,k,j) or none; over 20 rows nothing spills."""
    path = tmp_path / "mm.mlir"
    path.write_text(MATMUL.format(n=rows))
    program = from_mlir(str(path))
    region = Region.build(program, [op.output.tensor for op in program.ops])
    (inst,) = region.instances
    held = Nesting(region, ["k", "i", "j"])
    assert str(held.plan[inst.id]).startswith("spacc2")
    spilled = spilled_cost(held, inst)
    assert spilled == (rows * 349 if rows * 349 > ACCUMULATOR_CAPACITY else 0.0)
    assert nest_cost(held) == nest_cost(Nesting(region, ["i", "k", "j"])) + spilled
    column = Nesting(region, ["j", "k", "i"])
    assert str(column.plan[inst.id]).startswith("spacc[")
    assert spilled_cost(column, inst) == (rows * 349 if rows > ACCUMULATOR_CAPACITY else 0.0)
    if spilled:
        chosen = Nesting(region, default_order(region))
        assert spilled_cost(chosen, inst) == 0.0 and chosen.plan[inst.id].kind != "spacc2"
