"""What makes the fusion compiler fast changes none of its answers: the loop precedences
(`fusion.precedence`) that prune the walk proving a region has no valid order are obeyed by
every valid order, and the pruned walk refuses exactly the regions the walk checking `Nesting`
alone refuses; a `Nesting` extended from its parent prefix's equals one built afresh."""
import fuseflow
from fuseflow.fusion.compile import compile_schedule
from fuseflow.fusion.nesting import Nesting, count_orders, topological_orders
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
