"""The loop precedences (`fusion.precedence`) that prune the walk proving a region has no valid
order: every valid order obeys them, and the pruned walk refuses exactly the regions that the
walk checking `Nesting` alone refuses."""
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

