"""What makes the fusion compiler fast changes none of its answers: the loop precedences
(`fusion.precedence`) that prune the walk proving a region has no valid order are obeyed by
every valid order, and the pruned walk refuses exactly the regions the walk checking `Nesting`
alone refuses; a `Nesting` extended from its parent prefix's equals one built afresh."""
import fuseflow
from fuseflow.fusion import search
from fuseflow.fusion.compile import compile_schedule
from fuseflow.fusion.nesting import Nesting, count_orders, topological_orders
from fuseflow.fusion.order_memo import search_fingerprint
from fuseflow.fusion.precedence import has_no_valid_order, loop_precedences
from fuseflow.fusion.variants import region_variants

from fuzz_programs import RandomChooser, random_program


def _region_variants(seeds):
    """Every region variant of every group of `full` (both layouts) of random programs, with at
    most 5,000 orders that respect the storage constraints."""
    for seed in seeds:
        program = fuseflow.from_mlir(random_program(RandomChooser(seed)).mlir())
        for schedule in ("full", "full layout=induced"):
            try:
                compiled = compile_schedule(program, schedule)
            except fuseflow.FuseflowError:
                continue
            for kernel in compiled.kernels:
                if kernel.region is None:
                    continue
                for region in region_variants(program, kernel.group, compiled.formats, None, set()):
                    orders = count_orders(region)
                    if orders is not None and orders <= 5000:
                        yield region


def test_every_valid_order_obeys_the_precedences_and_the_pruned_walk_refuses_what_the_walk_refuses():
    refused = accepted = added = 0
    for region in _region_variants(range(25)):
        preds = loop_precedences(region)
        added += sum(map(len, preds.values())) > len(region.before)
        valid = [o for o in topological_orders(region) if Nesting(region, o).valid]
        for order in valid:
            pos = {v: k for k, v in enumerate(order)}
            assert all(pos[a] < pos[v] for v, before in preds.items() for a in before), (region.group, order)
        assert has_no_valid_order(region) == (not valid), region.group
        refused += not valid
        accepted += bool(valid)
    assert refused > 5 and accepted > 30 and added > 12, (refused, accepted, added)


def test_a_nesting_extended_from_its_parent_equals_one_built_afresh():
    """On every prefix of the orders of random programs' region variants (those with at most
    5,000 orders), whether the parent prefix is valid: the same rejection, nests and plans."""
    compared = 0
    for region in _region_variants(range(12)):
        nestings = {(): None}
        for order in topological_orders(region):
            for k in range(1, len(order) + 1):
                prefix = tuple(order[:k])
                if prefix in nestings:
                    continue
                partial = k < len(order)
                parent = nestings.get(prefix[:-1])
                fresh = Nesting(region, list(prefix), partial=partial)
                nestings[prefix] = fresh if fresh.valid else None
                if parent is None:
                    continue
                extended = Nesting(region, list(prefix), partial=partial, parent=parent)
                assert (extended.rejection, extended.nest, extended.plan, extended.value_vars) == \
                    (fresh.rejection, fresh.nest, fresh.plan, fresh.value_vars), (region.group, prefix)
                compared += 1
    assert compared > 1000, compared


TWO_CHAINS = """
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
func.func @two_chains(%A1: tensor<20x30xf32, #DCSR>, %B1: tensor<30x10xf32>, %C1: tensor<10x25xf32>,
                      %A2: tensor<20x30xf32, #DCSR>, %B2: tensor<30x10xf32>, %C2: tensor<10x25xf32{c2}>)
    -> (tensor<20x25xf32>, tensor<20x25xf32>) {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<20x10xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<20x10xf32>) -> tensor<20x10xf32>
  %e2 = tensor.empty() : tensor<20x25xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<20x25xf32>) -> tensor<20x25xf32>
  %T1 = linalg.matmul ins(%A1, %B1 : tensor<20x30xf32, #DCSR>, tensor<30x10xf32>)
                      outs(%f1 : tensor<20x10xf32>) -> tensor<20x10xf32>
  %O1 = linalg.matmul ins(%T1, %C1 : tensor<20x10xf32>, tensor<10x25xf32>)
                      outs(%f2 : tensor<20x25xf32>) -> tensor<20x25xf32>
  %T2 = linalg.matmul ins(%A2, %B2 : tensor<20x30xf32, #DCSR>, tensor<30x10xf32>)
                      outs(%f1 : tensor<20x10xf32>) -> tensor<20x10xf32>
  %O2 = linalg.matmul ins(%T2, %C2 : tensor<20x10xf32>, tensor<10x25xf32{c2}>)
                      outs(%f2 : tensor<20x25xf32>) -> tensor<20x25xf32>
  return %O1, %O2 : tensor<20x25xf32>, tensor<20x25xf32>
}
"""


def test_a_group_repeated_over_other_tensors_searches_alike_and_the_memo_changes_no_order(monkeypatch):
    """The two chains' groups have equal search fingerprints (their tensors differ, nothing the
    search reads does); a third chain over a sparse C does not. With the memo of default orders
    and without it, random programs compile to the same orders and graphs."""
    chains = "fusion=[T1,O1][T2,O2]"
    compiled = compile_schedule(fuseflow.from_mlir(TWO_CHAINS.replace("{c2}", "")), chains)
    first, second = (k.region for k in compiled.kernels)
    assert first.group != second.group and search_fingerprint(first) == search_fingerprint(second)
    assert compiled.kernels[0].order == compiled.kernels[1].order
    other = compile_schedule(fuseflow.from_mlir(TWO_CHAINS.replace("{c2}", ", #DCSR")), chains).kernels[1].region
    assert search_fingerprint(other) != search_fingerprint(first)

    def compiled_answers(seeds):
        answers = []
        for seed in seeds:
            random = fuseflow.from_mlir(random_program(RandomChooser(seed)).mlir())
            for schedule in ("full", "unfused", "full layout=induced"):
                try:
                    done = compile_schedule(random, schedule)
                except fuseflow.FuseflowError as err:
                    answers.append(str(err))
                    continue
                answers.append([(k.order, k.graph.to_text() if k.graph is not None else None) for k in done.kernels])
        return answers

    remembered = compiled_answers(range(10))
    monkeypatch.setattr(search, "remembered_order", lambda region, budget, work, find: find(region))
    assert compiled_answers(range(10)) == remembered
