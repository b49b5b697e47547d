"""`order=reference` (#38): groups take the order FuseFlow's reference compiler takes, the first
topological order concordant with the stored layouts (Kahn's algorithm, lowest-numbered
variable first), instead of the searched one; with every granularity, declared layouts only."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from cli_helpers import error_of
from test_default_schedule import CSR_TIMES_CSC  # a(i,j) CSR times b(i,j) CSC: the layouts cross

import fuseflow
from fuseflow.cli import main
from fuseflow.errors import UserError
from fuseflow.fusion.compile import compile_schedule
from fuseflow.fusion.reference_order import reference_order, storage_precedences
from fuseflow.fusion.search import NoValidOrder
from fuseflow.ir.canonicalize import prepare
from fuseflow.models.registry import build
from fuseflow.schedule.schedule import Schedule
from fuseflow.studies.granularity import read_schedules, same_schedules

MLIR = Path(__file__).parent / "mlir"


def concordant(kernel) -> bool:
    """Whether the kernel's order visits every stored access's levels outermost first."""
    pos = {v: k for k, v in enumerate(kernel.order)}
    return all(pos[a] < pos[b] for _, a, b in storage_precedences(kernel.region))


@pytest.fixture(scope="module")
def gcn():
    return build("gcn", "karate")


def test_gcn_full_takes_the_reference_order(gcn):
    """The reference names the fused GCN O(i,c) = A(i,k) (A(k,j) X(j,f) W1(f,h)) W2(h,c) and takes
    i,k,j,f,h,c; fuseflow names those variables i, l, n, m, k, j."""
    compiled = compile_schedule(gcn.program, "full order=reference")
    (kernel,) = compiled.kernels
    ours = dict(zip("ikjfhc", ("i", "l", "n", "m", "k", "j")))
    assert kernel.order == [ours[v] for v in "ikjfhc"] and concordant(kernel)
    assert str(compiled.schedule) == "full order=reference"


def test_graphsage_full_keeps_the_rows_outermost():
    """The searched order with induced layouts (the `full` preset) puts the 2-class loop outermost
    and reads A transposed; the reference's first concordant order reads every tensor as stored."""
    case = build("graphsage", "karate")
    (kernel,) = compile_schedule(case.program, "full order=reference").kernels
    assert kernel.order == ["i", "q", "m", "t", "n", "p", "r", "s", "k", "l", "j"] and concordant(kernel)
    a_rows = {leaf.level_vars()[0] for leaf in kernel.region.leaves if leaf.tensor == "A"}
    assert kernel.order[0] in a_rows


def test_a_matmul_chain_takes_the_first_concordant_order():
    """O = (A B) C with B stored column-major: the rule counts B's dense levels too (the search does
    not: dense levels are random access), so k comes before l; the order is the first of the orders
    concordant with every stored layout, variables numbered as the layouts first touch them."""
    program = prepare(fuseflow.from_mlir((MLIR / "matmul_chain.mlir").read_text()))
    schedule = "full order=reference format.B=dense,dense;order=1,0"
    (kernel,) = compile_schedule(program, schedule).kernels
    assert kernel.order == ["i", "k", "l", "j"]
    assert compile_schedule(program, "full format.B=dense,dense;order=1,0").kernels[0].order == ["i", "l", "k", "j"]
    precedences = storage_precedences(kernel.region)
    assert [(t, a, b) for t, a, b in precedences] == [("A", "i", "l"), ("B", "k", "l"), ("C", "k", "j")]
    number = {v: n for n, v in enumerate(dict.fromkeys(v for _, a, b in precedences for v in (a, b)))}
    first = min((order for order in itertools.permutations(kernel.region.vars)
                 if all(order.index(a) < order.index(b) for _, a, b in precedences)),
                key=lambda order: [number[v] for v in order])
    assert kernel.order == list(first) == reference_order(kernel.region)


@pytest.mark.parametrize("schedule", ["unfused order=reference", "partial order=reference",
                                      "fusion=[t2,t5][t6,t7,t8] order=reference"])
def test_every_granularity_takes_reference_orders(gcn, schedule):
    compiled = compile_schedule(gcn.program, schedule)
    kernels = [k for k in compiled.kernels if k.region is not None]
    assert len(kernels) > 1 and all(concordant(k) and k.order == reference_order(k.region) for k in kernels)


def test_a_given_order_still_wins(gcn):
    """A X in i,j,k (the rule takes i,k,j); its result, stored as written, then read by the rule."""
    compiled = compile_schedule(gcn.program, "unfused order=reference order.0=i,j,k")
    assert [k.order for k in compiled.kernels[:2]] == [["i", "j", "k"], ["i", "k", "j"]]
    assert compile_schedule(gcn.program, "unfused order=reference").kernels[0].order == ["i", "k", "j"]


@pytest.mark.parametrize("text, printed", [
    ("full order=reference", None),
    ("unfused order=reference", None),
    ("partial order=reference par=i:2", None),
    ("fusion=[t2,t5][t6] order=reference order.1=j,i format.t5=dense,compressed", None),
    ("order=reference full order=i,k,j", "full order=reference order.0=i,k,j"),
    ("full order=search", "full"),
])
def test_the_rule_round_trips(text, printed):
    schedule = Schedule.parse(text)
    assert str(schedule) == (printed or text)
    again = Schedule.parse(str(schedule))
    assert (again.order_rule, again.orders, again.fusion, again.groups) == \
        (schedule.order_rule, schedule.orders, schedule.fusion, schedule.groups)


@pytest.mark.parametrize("text, message", [
    ("full order=reference layout=induced", "does not combine|layout=induced lays the inputs out"),
    ("layout=induced unfused order=reference", "layout=induced lays the inputs out"),
    ("full order.1=reference", "order=reference is for every group"),
])
def test_bad_combinations_are_refused(text, message):
    with pytest.raises(UserError, match=message):
        Schedule.parse(text)


def test_bad_combination_is_one_line_on_the_command_line(capsys):
    err = error_of(["compile", "--model", "gcn", "--dataset", "karate", "--schedule",
                    "full order=reference layout=induced"], capsys)
    assert "drop one of order=reference and layout=induced" in err


def test_a_cycle_of_stored_layouts_names_the_tensors(tmp_path, capsys):
    """No fallback to induced layouts: the rule reads the declared ones."""
    with pytest.raises(UserError, match="the stored layouts ask for a cycle: a stores i before j, b stores j "
                                        "before i") as err:
        compile_schedule(fuseflow.from_mlir(CSR_TIMES_CSC), "full order=reference")
    assert not isinstance(err.value, NoValidOrder)
    path = tmp_path / "mul.mlir"
    path.write_text(CSR_TIMES_CSC)
    assert "group 0 (r) has no valid reference order" in error_of(
        ["compile", str(path), "--schedule", "full order=reference"], capsys)


def test_an_invalid_first_order_says_which_rule_rejects_it():
    program = prepare(fuseflow.from_mlir((MLIR / "matmul_chain.mlir").read_text()))
    with pytest.raises(UserError, match=r"the first order concordant with the stored layouts i,l,j,k is not valid: "
                                        r"T needs an order-2 sparse accumulator.*order\.0="):
        compile_schedule(program, "full order=reference format.C=dense,compressed;order=1,0")


def test_a_study_tells_the_rule_apart(gcn):
    read = read_schedules(gcn, ["full layout=declared", "full order=reference", "full order=search"])
    assert same_schedules(gcn, read) == [("full layout=declared", "full order=search")]


def test_simulate_verifies_and_orders_marks_it(capsys):
    assert main(["simulate", "--model", "graphsage", "--dataset", "karate", "--schedule",
                 "full order=reference", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verified"] and result["schedule"] == "full order=reference"
    assert result["kernels"][0]["order"][0] == "i"
    assert main(["orders", str(MLIR / "matmul_chain.mlir"), "--schedule", "full order=reference"]) == 0
    assert "i,l,k,j                  cost 1.1e+04    <- reference" in capsys.readouterr().out
