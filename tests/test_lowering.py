"""Lowering: every test program under every granularity and up to 24 orders per group lowers to a
graph that verifies, and simulates (oracle) to the numpy reference result."""
import json
import os

import numpy as np
import pytest

import fuseflow
from fuseflow.errors import UserError
from fuseflow.execute import decode, execute
from fuseflow.fusion.compile import compile_schedule
from fuseflow.ir.formats import TensorFormat
from fuseflow.sam.graph import SamGraph
from fuseflow.sim import fast
from fuseflow.sim.oracle import run_graph as oracle_run_graph
from fuseflow.sim.storage import StoredTensor

from lowering_cases import MLIR_FILES, close, fix_data, load, order_variants, schedules, torch_programs

CASES = [(path, schedule) for path in MLIR_FILES for schedule in schedules(*load(path))]


def _params(cases):
    return [pytest.param(path, schedule, id=f"{os.path.basename(path)}-{schedule}") for path, schedule in cases]


def check_variant(program, shapes, data, gold, variant, run_graph_fn=None):
    compiled = compile_schedule(program, variant, shapes)
    for kernel in compiled.kernels:
        if kernel.graph is None:
            continue
        kernel.graph.verify()
        kernel.graph.verify_single_consumers()
        again = SamGraph.from_json(kernel.graph.to_json())  # the JSON form loads back identically
        assert again.to_text() == kernel.graph.to_text()
    run = execute(compiled, data, run_graph_fn=run_graph_fn) if run_graph_fn else execute(compiled, data)
    for name in program.outputs:
        assert close(run.outputs[name], gold[name]), f"{variant}: {name} differs from the reference"
    return compiled


@pytest.mark.slow
@pytest.mark.parametrize("path, schedule", _params(CASES))
def test_mlir_program_lowers_and_simulates(path, schedule):
    program, shapes = load(path)
    data = fix_data(path, fuseflow.random_inputs(program, density=0.3, seed=7, shapes=shapes))
    gold = fuseflow.reference(program, data)
    variants = order_variants(program, schedule, shapes)
    for variant in variants:
        check_variant(program, shapes, data, gold, variant)


TORCH = torch_programs()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TORCH))
def test_torch_model_lowers_and_simulates(name):
    program, data = TORCH[name]
    gold = fuseflow.reference(program, data)
    checked = 0
    for schedule in schedules(program):
        for variant in order_variants(program, schedule, limit=4):
            check_variant(program, None, data, gold, variant, fast.run_graph)  # fast == oracle: test_sim_fast
            checked += 1
    assert checked >= 6


def test_unfused_has_one_kernel_per_op_and_full_one():
    program, _ = load(os.path.join(os.path.dirname(__file__), "mlir", "matmul_chain.mlir"))
    assert len(compile_schedule(program, "unfused").kernels) == len(program.ops)
    assert len(compile_schedule(program, "full").kernels) == 1


def test_fusion_removes_intermediate_traffic():
    """Fusing (A·B)·C keeps T on chip: the fused kernel writes only O's values."""
    program, _ = load(os.path.join(os.path.dirname(__file__), "mlir", "matmul_chain.mlir"))
    data = fuseflow.random_inputs(program, density=0.4, seed=3)
    unfused = execute(compile_schedule(program, "unfused"), data)
    fused = execute(compile_schedule(program, "full"), data)
    assert fused.total("mem_writes") < unfused.total("mem_writes")
    assert np.allclose(fused.outputs["O"], unfused.outputs["O"])


def test_invalid_order_is_rejected_with_reason():
    program, _ = load(os.path.join(os.path.dirname(__file__), "mlir", "matmul_chain.mlir"))
    with pytest.raises(UserError, match=r"violates the mode order of A \(i before l\)"):
        compile_schedule(program, "full order=l,i,k,j")
    with pytest.raises(UserError, match="must list each of"):
        compile_schedule(program, "full order=i,k")


def test_invalid_grouping_is_rejected():
    program, _ = load(os.path.join(os.path.dirname(__file__), "mlir", "matmul_chain.mlir"))
    with pytest.raises(UserError, match="which no op produces"):
        compile_schedule(program, "fusion=[T,X]")
    with pytest.raises(UserError, match="is in groups 0 and 1"):
        compile_schedule(program, "fusion=[T][T,O]")


def test_shared_intermediate_filtered_by_one_consumer_is_copied():
    """T feeds Y = T*M (an intersection) and Z = T + Y: Z must see all of T, so T is computed twice."""
    program, _ = load(os.path.join(os.path.dirname(__file__), "mlir", "shared_filter.mlir"))
    compiled = compile_schedule(program, "full")
    region = compiled.kernels[0].region
    assert [i.tensor for i in region.instances].count("T") == 2


def test_dense_operand_is_read_out_of_its_stored_order():
    """B stored column-major (k before l) in an order visiting l first: a dense tensor is read by
    random access (strided scans), where a compressed one would need another layout."""
    program, _ = load(os.path.join(os.path.dirname(__file__), "mlir", "matmul_chain.mlir"))
    data = fuseflow.random_inputs(program, density=0.4, seed=5)
    compiled = compile_schedule(program, "unfused order.0=i,k,j format.B=dense,dense;order=1,0")
    strided = [n.params["stride"] for n in compiled.kernels[0].graph.nodes
               if n.kind in ("scan", "locate") and n.params.get("stride")]
    assert sorted(strided) == [1, 30]  # B(k,j) stored as (j,k): k located with step 1, j scanned by 30
    run = execute(compiled, data)
    A, B, C = (data[n].todense() if hasattr(data[n], "todense") else np.asarray(data[n]) for n in "ABC")
    assert np.allclose(run.outputs["O"], (A @ B) @ C)


def test_intersection_with_a_dense_vector_locates_instead_of_scanning():
    """y = A·x with x dense: the kernel walks A's stored entries and looks x up (iterate-locate),
    so its steps follow A's nonzeros, not rows x columns."""
    program, _ = load(os.path.join(os.path.dirname(__file__), "mlir", "spmv.mlir"))
    data = fuseflow.random_inputs(program, density=0.05, seed=2)
    compiled = compile_schedule(program, "full order=i,j")
    kinds = [n.kind for n in compiled.kernels[0].graph.nodes]
    assert "locate" in kinds and "intersect" not in kinds
    run = execute(compiled, data)
    A = data["A"].todense() if hasattr(data["A"], "todense") else np.asarray(data["A"])
    assert np.allclose(run.outputs["y"], A @ np.asarray(data["x"]))
    nnz = int(np.count_nonzero(A))
    assert run.cycles < 64 * 48 / 4 and run.cycles < 10 * (nnz + 64)


def test_covered_dims_follow_dense_levels_unions_and_reductions():
    """Y = (x·W + bias) * scale with x CSR: x covers its rows only; x·W covers nothing (its sum
    over x's compressed columns may see an empty fiber); adding the dense bias covers Y."""
    from fuseflow.fusion.coverage import covered_dims
    from fuseflow.ir.background import backgrounds

    program, _ = load(os.path.join(os.path.dirname(__file__), "mlir", "constants.mlir"))
    covered = covered_dims(program, {"xW", "Y"}, {}, backgrounds(program))
    assert covered["x"] == {0} and covered["W"] == {0, 1}
    assert covered["xW"] == set() and covered["Y"] == {0, 1}


@pytest.mark.parametrize("order", ["i,j,k", "k,i,j", "j,k,i", "k,j,i"])
def test_induced_layout_never_shares_a_producer_its_consumer_may_filter(order):
    """B (CSR) laid out by the order may put its compressed level on any dimension: the producer
    P shared by R1 = P*B and Z = R1 + P*D is then copied, and Z is right in every order."""
    program, _ = load(os.path.join(os.path.dirname(__file__), "mlir", "shared_induced.mlir"))
    data = fuseflow.random_inputs(program, density=0.3, seed=3)
    run = execute(compile_schedule(program, f"full layout=induced order={order}"), data)
    assert np.allclose(run.outputs["Z"], fuseflow.reference(program, data)["Z"])


def test_buffered_read_keeps_the_producers_values_for_its_other_readers():
    """x feeds a residual after a reduce-and-rebuild (read through a buffer, with values of its
    own) and a later product, which still reads x's own stream. An explicit order of the
    buffered region compiles that region again."""
    import torch

    from fuseflow.fusion.nesting import valid_orders

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1, self.w2 = torch.nn.Parameter(torch.randn(5, 4)), torch.nn.Parameter(torch.randn(4, 5))
            self.w3, self.w4 = torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(5, 3))
            self.b = torch.nn.Parameter(torch.randn(5))

        def forward(self, A):
            x = A * 2.0 + self.b  # covers every coordinate: consumers share it instead of copying
            r = x + (x @ self.w1) @ self.w2
            return r @ self.w4 + x @ self.w3

    torch.manual_seed(0)
    A = ((torch.rand(6, 5) < 0.4).float() * torch.randn(6, 5)).to_sparse_csr()
    program = fuseflow.from_torch(Model(), A, formats={"A": "dense,compressed"})
    data = fuseflow.random_inputs(program, density=0.4, seed=1)
    gold = fuseflow.reference(program, data)[program.outputs[0]]
    compiled = compile_schedule(program, "full")
    region = compiled.kernels[0].region
    assert any(inst.rename for inst in region.instances)
    assert np.allclose(execute(compiled, data).outputs[program.outputs[0]], gold)
    order = next(o for o in valid_orders(region) if o != compiled.kernels[0].order)
    again = compile_schedule(program, "full order=" + ",".join(order))
    assert again.kernels[0].region.variant == region.variant
    assert np.allclose(execute(again, data).outputs[program.outputs[0]], gold)


def _elementwise_program(inputs: dict, ops: list, output: str):
    """A 6x5 program of elementwise ops: `inputs` name -> format text, `ops` (name, operands, body)."""
    from fuseflow.ir.formats import TensorFormat
    from fuseflow.ir.program import Access, IndexOp, Program, Tensor

    program = Program("elementwise")
    for name, fmt in inputs.items():
        program.add_tensor(Tensor(name, (6, 5), format=TensorFormat.parse(fmt, 2)), role="input")
    for name, operands, body in ops:
        program.add_tensor(Tensor(name, (6, 5)))
        program.add_op(IndexOp(Access(name, ("i", "j")), tuple(Access(t, ("i", "j")) for t in operands), body))
    program.outputs.append(output)
    return program


@pytest.mark.parametrize("case", ["padding", "padding_dcsr", "lattice", "signed", "twice"])
def test_merges_keep_every_operands_values(case):
    """Ways a merge could lose values: P shared by C2 (no joiner) and U = P + B (a union that
    pads P, which must not move C2's coordinates; with A stored DCSR the padding reaches the
    row level, so U gets its own P); (a+b)*(c+b), whose minimal merge b ∪ (a ∩ c) would read c
    as missing where a is; max(a, (b-a)*c), where that shows only for negative values; (a+b)*E,
    which must stream E once."""
    from fuseflow.ir.expr import Binary, Const, In

    mul, add = (lambda x, y: Binary("mul", x, y)), (lambda x, y: Binary("add", x, y))
    csr, dcsr = "dense,compressed", "compressed,compressed"
    program = {
        "padding_dcsr": lambda: _elementwise_program(
            {"A": dcsr, "B": csr},
            [("P", ["A"], mul(In(0), Const(2.0))), ("C2", ["P"], mul(In(0), Const(3.0))),
             ("U", ["P", "B"], add(In(0), In(1))), ("Z", ["C2", "U"], add(In(0), In(1)))], "Z"),
        "signed": lambda: _elementwise_program(
            {"a": csr, "b": csr, "c": csr},
            [("Y", ["a", "b", "c"], Binary("max", In(0), mul(Binary("sub", In(1), In(0)), In(2))))], "Y"),
        "padding": lambda: _elementwise_program(
            {"A": csr, "B": csr},
            [("P", ["A"], mul(In(0), Const(2.0))), ("C2", ["P"], mul(In(0), Const(3.0))),
             ("U", ["P", "B"], add(In(0), In(1))), ("Z", ["C2", "U"], add(In(0), In(1)))], "Z"),
        "lattice": lambda: _elementwise_program(
            {"a": csr, "b": csr, "c": csr}, [("Y", ["a", "b", "c"], mul(add(In(0), In(1)), add(In(2), In(1))))], "Y"),
        "twice": lambda: _elementwise_program(
            {"a": csr, "b": csr, "E": "dense,dense"}, [("Y", ["a", "b", "E"], mul(add(In(0), In(1)), In(2)))], "Y"),
    }[case]()
    data = fuseflow.random_inputs(program, density=0.4, seed=2 if case == "signed" else 1)
    gold = fuseflow.reference(program, data)[program.outputs[0]]
    for schedule in ("unfused", "full", "full layout=induced"):
        run = execute(compile_schedule(program, schedule), data)
        assert np.allclose(run.outputs[program.outputs[0]], gold), schedule


@pytest.mark.parametrize("schedule", ["full", "full block=2"])
def test_a_graph_loaded_from_json_runs_without_the_compiler(schedule):
    """The JSON file of a graph names its tensors with the same fields as always, and the
    simulator runs the loaded graph on tensors stored from that file's entries alone."""
    program = fuseflow.from_mlir(os.path.join(os.path.dirname(__file__), "mlir", "spmv.mlir"))
    data = fuseflow.random_inputs(program, density=0.5, seed=3)
    (kernel,) = compile_schedule(program, schedule).kernels
    text = json.dumps(kernel.graph.to_json())
    entries = json.loads(text)["tensors"]
    assert {tuple(sorted(e)) for e in entries.values()} <= {
        ("fill", "levels", "mode_order", "role", "shape", "source"), ("fill", "levels", "mode_order", "role", "shape"),
        ("block", "fill", "levels", "mode_order", "role", "shape", "source"),
        ("block", "fill", "levels", "mode_order", "role", "shape")}
    assert any("block" in e for e in entries.values()) == ("block" in schedule)
    loaded = SamGraph.from_json(json.loads(text))
    assert loaded.tensors == kernel.graph.tensors and json.dumps(loaded.to_json()) == text
    stored = {name: StoredTensor.from_dense(data[t.stores(name)], TensorFormat.of(t), t.fill)
              for name, t in loaded.tensors.items() if t.role == "input"}
    run = oracle_run_graph(loaded, stored)
    got = decode(run.written["y"], loaded.tensors["y"])
    assert np.allclose(got, fuseflow.reference(program, data)["y"])
