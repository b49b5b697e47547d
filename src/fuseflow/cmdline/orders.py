"""`fuseflow orders MODEL`: each group's valid dataflow orders (as `order.N=#k` names them), with
their estimated cost and the default (or `order=reference`'s order) marked.

    fuseflow orders tests/mlir/matmul_chain.mlir [--schedule S] [--group N] [--limit 50] [-v]
"""
from __future__ import annotations

from ..fusion.listing import order_listing
from .args import budget_of
from .compile import compile_source
from .source import load_source


def run(args) -> int:
    compiled = compile_source(load_source(args, budget_of(args)), args)
    weighed = "weighed by the data's densities" if compiled.kernels and any(
        k.region is not None and k.region.stats is not None for k in compiled.kernels) else "by sizes alone"
    for kernel in compiled.kernels:
        region = kernel.listed_region()
        if region is None or (args.group is not None and kernel.index != args.group):
            continue
        region.stats = kernel.region.stats  # costs weighed as the compiler weighed them
        mark = "given" if kernel.index in compiled.schedule.orders else \
            "reference" if compiled.schedule.order_rule == "reference" else "default"
        for line in order_listing(region, f"group {kernel.index} ({','.join(kernel.group)})", args.limit,
                                  args.verbose, kernel.order, mark, f"; cost = estimated loop work, {weighed}"):
            print(line, flush=True)
    return 0
