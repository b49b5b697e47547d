"""Negative goldens: for each reason `Nesting` rejects an order (or a prefix of one) for, a
(program, group, region variant, order) that it rejects with that reason and message.

A new rejection reason needs a case here (`test_every_reason_has_a_golden`). A reason found for a
prefix prunes the order search, so no full order extending such a prefix may be valid.
"""
import itertools
import os
from dataclasses import dataclass, field

import pytest

import fuseflow
from fuseflow.fusion.nesting import REASONS, Nesting, order_problem, topological_orders
from fuseflow.fusion.region import Region
from fuseflow.ir.canonicalize import prepare

MLIR = os.path.join(os.path.dirname(__file__), "mlir")

# (A·B)·C then a ReLU of the product: the accumulator of the second product feeds the ReLU
CHAIN_RELU = """
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
#id = affine_map<(i, j) -> (i, j)>
func.func @chain_relu(%A: tensor<6x5xf32, #DCSR>, %B: tensor<5x4xf32>, %C: tensor<4x3xf32>)
    -> tensor<6x3xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<6x4xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<6x4xf32>) -> tensor<6x4xf32>
  %T = linalg.matmul ins(%A, %B : tensor<6x5xf32, #DCSR>, tensor<5x4xf32>)
                     outs(%f1 : tensor<6x4xf32>) -> tensor<6x4xf32>
  %e2 = tensor.empty() : tensor<6x3xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<6x3xf32>) -> tensor<6x3xf32>
  %O = linalg.matmul ins(%T, %C : tensor<6x4xf32>, tensor<4x3xf32>)
                     outs(%f2 : tensor<6x3xf32>) -> tensor<6x3xf32>
  %R = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%O : tensor<6x3xf32>) outs(%e2 : tensor<6x3xf32>) {
  ^bb0(%x: f32, %out: f32):
    %y = arith.maximumf %x, %zero : f32
    linalg.yield %y : f32
  } -> tensor<6x3xf32>
  return %R : tensor<6x3xf32>
}
"""


@dataclass(frozen=True)
class Case:
    reason: str
    program: str  # a file in tests/mlir, or MLIR text
    group: tuple
    order: tuple  # a full order, or for the prefix reasons a prefix
    message: str
    options: dict = field(default_factory=dict)  # Region.build's variant options
    free: bool = False  # inputs laid out by the order (layout=induced)

    @property
    def prefix(self) -> bool:
        return self.reason.startswith("open-")


SOFTMAX = ("m", "E", "s", "O")  # softmax_sparse.mlir: row max, exp, row sum, division
CASES = [
    Case("open-reduction", "sddmm_masked.mlir", ("P", "O"), ("k",), "P reduces k with 2 loops inside it"),
    Case("open-nesting", "softmax_sparse.mlir", SOFTMAX, ("i", "j", "k"), "m iterates k that E does not",
         {"separate_reductions": True}),
    Case("accumulator-feeds-consumer", "sddmm_masked.mlir", ("P", "O"), ("k", "i", "j"),
         "P needs an order-2 sparse accumulator, whose outer output cannot feed a fused consumer"),
    Case("accumulator-order-3", "batch_matmul.mlir", ("O",), ("l", "i", "j", "k"),
         "O reduces l with i,j,k inside it (needs a sparse accumulator of order >= 3)", free=True),
    Case("consumer-lacks-loop", "softmax_sparse.mlir", SOFTMAX, ("i", "j", "k", "l"), "m iterates k that E does not",
         {"separate_reductions": True}),
    Case("buffer-transposed", "softmax_sparse.mlir", SOFTMAX, ("j", "i", "k", "l"),
         "O would read the buffered E transposed", {"buffered": {("O", 0)}}),
    Case("buffer-everything", "reshape.mlir", ("G", "U", "H"), ("i", "j"), "H would buffer all of U",
         {"buffered": {("H", 0)}}),
    Case("replayed-values", "softmax_sparse.mlir", SOFTMAX, ("j", "i", "k"),
         "the values of s would have to be replayed inside j for O", free=True),
    Case("output-recomputed", "reshape.mlir", ("G", "U", "H"), ("j", "i"),
         "output U is recomputed inside j and cannot be written", {"buffered": {("H", 0)}}),
    Case("accumulator-incomplete", CHAIN_RELU, ("T", "O", "R"), ("i", "k", "j", "l"),
         "the accumulated O is read at j but its inputs complete only at l"),
    Case("buffer-incomplete", "softmax_sparse.mlir", SOFTMAX, ("i", "j", "k", "l"),
         "O reads E again in loop j before it is complete (at l)", {"buffered": {("O", 0)}}),
]


def _region(case: Case) -> Region:
    source = case.program if "func.func" in case.program else os.path.join(MLIR, case.program)
    program = prepare(fuseflow.from_mlir(source))
    free = set(program.inputs) if case.free else set()
    return Region.build(program, list(case.group), free=free, **case.options)


@pytest.mark.parametrize("case", CASES, ids=[c.reason for c in CASES])
def test_rejection_golden(case):
    region = _region(case)
    nesting = Nesting(region, list(case.order), partial=case.prefix)
    assert nesting.rejection is not None, f"{case.order} is accepted"
    assert (nesting.rejection.reason, nesting.rejection.text) == (case.reason, case.message)
    if not case.prefix:  # what `fuseflow orders -v` and a schedule's order=... report
        assert order_problem(region, list(case.order)) == case.message


@pytest.mark.parametrize("case", [c for c in CASES if c.prefix], ids=lambda c: c.reason)
def test_rejected_prefix_has_no_valid_extension(case):
    region = _region(case)
    extensions = [o for o in itertools.islice(topological_orders(region), 5000)
                  if tuple(o[:len(case.order)]) == case.order]
    assert extensions, "the prefix extends to no order: the case tests nothing"
    assert not [o for o in extensions if Nesting(region, o).valid]


def test_every_reason_has_a_golden():
    assert sorted(c.reason for c in CASES) == sorted(REASONS)
