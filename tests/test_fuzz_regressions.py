"""Minimal programs for what the random-program fuzzer found (the size-1 class is in
tests/test_unit_dims.py), each checked against numpy written here, and honest checks: nothing to
compare is said, not reported as verified."""
import numpy as np
import pytest

import fuseflow
from fuseflow.cli import main
from fuseflow.errors import UserError
from fuseflow.fusion.compile import compile_schedule
from fuseflow.fusion.nesting import valid_orders
from fuseflow.ir.reference import bind_inputs
from fuseflow.ir.stats import stats_for
from fuseflow.pipeline import simulate

from fuzz_programs import RandomProgram, Step, Value


def test_a_fused_transpose_of_blocked_values():
    """t1 = exp(a)ᵀ fused with block=2: the copy reorders its tile's axes (an ALU times 1 whose
    output tile is transposed), where it used to be refused."""
    a, t0, t1 = Value("a0", (4, 4)), Value("t0", (4, 4)), Value("t1", (4, 4))
    p = RandomProgram([a], [Step("exp", (a,), t0), Step("transpose", (t0,), t1)], [t1])
    program = fuseflow.from_mlir(p.mlir())
    data = p.data(0)
    for schedule in ("full block=2", "full block=2 order=j,i"):
        result = simulate(program, schedule, data)
        assert result.verified and np.allclose(result.outputs["t1"], np.exp(data["a0"]).T), schedule


def test_a_fused_chain_whose_only_valid_orders_lie_deep():
    """Fuzz program 3346 of seed 18: softmax, a difference, a contraction over a transposed operand,
    softmax again, fully fused. Only the region whose reductions keep their variables has valid
    orders (16 variables); the walk used to spend its prefixes below prefixes whose accumulators'
    producers still had loops to place, and `full` was refused. Such a prefix is dropped now."""
    a0, a1, a2 = Value("a0", (9, 4), "csr"), Value("a1", (9, 4), "csr"), Value("a2", (9, 8), "csc")
    t0, t2, t3, t4 = Value("t0", (9, 4)), Value("t2", (9, 4)), Value("t3", (4, 8)), Value("t4", (4, 8))
    steps = [Step("softmax", (a0,), t0), Step("sub", (t0, a1), t2), Step("contract", (t2, a2), t3, ("ki", "kj")),
             Step("softmax", (t3,), t4)]
    p = RandomProgram([a0, a1, a2], steps, [t4], {"a0": 0.5, "a1": 0.5, "a2": 0.5})
    data = p.data(1)
    result = simulate(fuseflow.from_mlir(p.mlir()), "full", data)
    a = np.where(data["a0"] != 0, data["a0"], 0.0)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    u = (e / e.sum(axis=1, keepdims=True) - data["a1"]).T @ data["a2"]
    want = np.exp(u - u.max(axis=1, keepdims=True))
    assert result.verified and np.allclose(result.outputs["t4"], want / want.sum(axis=1, keepdims=True))


NOTHING_RETURNED = """
func.func @f(%a: tensor<3xf32>) {
  %e = tensor.empty() : tensor<3xf32>
  %r = linalg.exp ins(%a : tensor<3xf32>) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  return
}"""


def test_a_function_returning_nothing_has_nothing_to_compare(tmp_path, capsys):
    """Returning nothing and writing into no argument (the result is dropped) leaves nothing to
    simulate or compare: one line and exit 2, never `verified`. (Writing through an argument's
    `outs` makes that result an output: test_field_forms.py.)"""
    program = fuseflow.from_mlir(NOTHING_RETURNED)
    with pytest.raises(UserError, match="returns no tensor, so there is nothing to compare"):
        simulate(program, "full")
    path = tmp_path / "none.mlir"
    path.write_text(NOTHING_RETURNED)
    assert main(["simulate", str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing to compare" in err


def test_an_order_picked_by_index_is_the_one_orders_lists(capsys):
    """Fuzz program 554 of seed 2026, reduced: t4 = t3ᵀ·a4ᵀ reads t3, which group 0 writes in the
    layout group 1 asks for to save work. Picking group 1's order by index used to skip that
    negotiation (and weigh layouts by the picked order), so `order.1=#2` indexed another list
    than `fuseflow orders` shows and was refused. Every listed index now picks its order."""
    t2, a3, a4 = Value("t2", (2, 8)), Value("a3", (5, 2), "csr"), Value("a4", (3, 8), "dcsr")
    t3, t4 = Value("t3", (8, 5)), Value("t4", (5, 3))
    steps = [Step("contract", (t2, a3), t3, ("ki", "jk")), Step("contract", (t3, a4), t4, ("ki", "jk"))]
    p = RandomProgram([a3, a4, t2], steps, [t4], {"a3": 0.8, "a4": 0.0})
    program, data = fuseflow.from_mlir(p.mlir()), p.data(2026 * 1_000_003 + 554)
    stats = stats_for(program, bind_inputs(program, data))
    shapes = {n: v.shape for n, v in data.items()}
    listed = compile_schedule(program, "unfused", shapes, stats=stats).kernels[1].listed_region()
    orders = list(valid_orders(listed))
    assert len(orders) == 3
    for k, order in enumerate(orders):
        result = simulate(program, f"unfused order.1=#{k}", data)
        assert result.kernels[1].order == order
        assert result.verified and np.allclose(result.outputs["t4"], data["a3"] @ data["t2"] @ data["a4"].T)


@pytest.mark.parametrize("block", ["", " block=3"])
def test_a_dense_softmax_read_where_its_partner_is_missing(block):
    """Fuzz program 3219 of seed 2026, reduced: t1 = softmax(a0) is written dense; t2 = t1·a1 with
    a1 empty, fused with t3 = max(t2, a2). t1's background is +inf (exp(0 - max) of an empty
    row), so the merges visit every k, and where the loop over j finds no a1 entry t1's
    reference is missing too: read as inf, times a1's 0, t3 was nan everywhere. A tensor stored
    dense reads 0 there (its partner is 0)."""
    a0, a1, a2 = Value("a0", (4, 9), "csr"), Value("a1", (9, 5), "dcsr"), Value("a2", (4, 5))
    t1, t2, t3 = Value("t1", (4, 9)), Value("t2", (4, 5)), Value("t3", (4, 5))
    steps = [Step("softmax", (a0,), t1), Step("contract", (t1, a1), t2, ("ik", "kj")), Step("max", (t2, a2), t3)]
    p = RandomProgram([a0, a1, a2], steps, [t3], {"a0": 0.5, "a1": 0.0})
    data = p.data(1)
    result = simulate(fuseflow.from_mlir(p.mlir()), "fusion=[t1_max,t1_exp,t1_sum,t1][t2,t3] layout=induced" + block,
                      data)
    assert result.verified and np.array_equal(result.outputs["t3"], np.maximum(0.0, data["a2"]))


def test_row_sums_of_a_sparse_matrix_kept_as_a_column():
    """Fuzz program 31 of seed 7: t0 = rowsum(a0) kept as 3x1 over a CSC a0, then read as a
    matrix. The reference's sparse path gave a vector (3,), which the next op indexed as 3x1."""
    a0, a1 = Value("a0", (3, 3), "csc"), Value("a1", (5, 3), "dcsr")
    t0, t1, t2 = Value("t0", (3, 1)), Value("t1", (1, 3)), Value("t2", (1, 5))
    steps = [Step("reduce", (a0,), t0, ("sum", 1)), Step("transpose", (t0,), t1),
             Step("contract", (t1, a1), t2, ("ik", "jk"))]
    p = RandomProgram([a0, a1], steps, [t2], {"a0": 0.5, "a1": 0.5})
    program, data = fuseflow.from_mlir(p.mlir()), p.data(31)
    want = p.evaluate(data)["t2"]
    for schedule in ("unfused", "full"):
        result = simulate(program, schedule, data)
        assert result.verified and np.allclose(result.outputs["t2"], want), schedule
        sharded = fuseflow.simulate(program, schedule, data, shards=2)
        assert sharded.verified and (sharded.cycles, sharded.tokens) == (result.cycles, result.tokens), schedule


def test_a_kernel_whose_outer_loop_feeds_a_reduction_to_later_ops_runs_whole_when_partitioned():
    """Fuzz program 5 of seed 7: t3 = max(a0·a1, a3) fused with the product, the product's
    reduction outermost: a window holds part of each sum, so its t3 was wrong (exit 3). Sharded
    or sampled, such a kernel runs as one window and says so."""
    a0, a1, a3 = Value("a0", (1, 10), "csc"), Value("a1", (10, 3), "dcsr"), Value("a3", (1, 3), "dcsr")
    t0, t3, t4 = Value("t0", (1, 3)), Value("t3", (1, 3)), Value("t4", (1, 1))
    steps = [Step("matmul", (a0, a1), t0), Step("max", (t0, a3), t3, ("max",)), Step("reduce", (t3,), t4, ("max", 1))]
    p = RandomProgram([a0, a1, a3], steps, [t4], {"a0": 0.8, "a1": 0.8, "a3": 0.8})
    program, data = fuseflow.from_mlir(p.mlir()), p.data(5)
    schedule = "fusion=[t0,t3][t4]"
    assert fuseflow.compile(program, schedule).kernels[0].order[0] == "k"  # the product's reduction, outermost
    whole = simulate(program, schedule, data)
    assert whole.verified and np.allclose(whole.outputs["t4"], p.evaluate(data)["t4"])
    for how in ({"shards": 3}, {"sample": 0.5}):
        r = fuseflow.simulate(program, schedule, data, **how)
        assert r.verified and (r.cycles, r.tokens) == (whole.cycles, whole.tokens), how
        assert "kernel 0 whole: its outer loop is a reduction that later ops of the kernel read" in r.method, how


def test_a_recomputed_copys_reduction_over_a_windowed_loop_runs_whole_when_partitioned():
    """CI's fuzz case of seed 68942: column sums t0 fused with the softmax over them, block=3. The
    softmax's copies of t0 loop over variables of their own, which a window restricts as it does
    the outer one (their scanners start from the root), so the row maximum saw part of t0 ('t3
    stores values outside the window's rows', exit 3). Such a kernel runs as one window."""
    a0, a1 = Value("a0", (12, 4), "csr"), Value("a1", (4, 1))
    t0, t1, t2, t3, t4 = (Value(n, s) for n, s in (("t0", (1, 4)), ("t1", (1, 1)), ("t2", (1, 4)), ("t3", (1, 4)),
                                                   ("t4", (1, 4))))
    steps = [Step("reduce", (a0,), t0, ("sum", 0)), Step("matmul", (t0, a1), t1), Step("softmax", (t0,), t2),
             Step("add", (t2, t2), t3, ("add",)), Step("softmax", (t3,), t4)]
    p = RandomProgram([a0, a1], steps, [t4, t0], {"a0": 0.5})
    program, data = fuseflow.from_mlir(p.mlir()), p.data(68942)
    schedule = "fusion=[t0,t2_max,t2_exp,t2_sum,t2,t3][t4_max,t4_exp,t4_sum][t4] layout=induced block=3 order.0=#8"
    whole = simulate(program, schedule, data)
    sharded = fuseflow.simulate(program, schedule, data, shards=2)
    assert sharded.verified and (sharded.cycles, sharded.tokens) == (whole.cycles, whole.tokens)
    assert "kernel 0 whole: its outer loop is a reduction that later ops of the kernel read" in sharded.method
