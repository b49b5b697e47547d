"""fusion: a schedule's groups compiled to SamGraphs, in this order per group:

1. region (`region`, built by `binding`; records in `instances`): the group's ops as instances
   over shared index variables; `variants` lists the ways producers may be shared or copied;
2. nesting (`nesting`): how each instance nests in a dataflow order and whether the lowering
   supports it (a `Rejection` with one of `REASONS` if not);
3. search (`search`, costed by `cost`): the default order, the valid one with the least work;
4. table (`table`): the fusion table of the region in that order, its cells given by the
   merge semantics of each instance (`merge`, over the patterns of `patterns`);
5. lower (`lower`): the table as a SamGraph (blocked by `blocking`'s tiling if asked).

`compile` runs these for every group, negotiating the layouts that groups pass to each other
(`layouts`); `coverage` says which streams hold every coordinate, so producers may be shared.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.compile import compile_schedule
    >>> kernel = compile_schedule(from_mlir("tests/mlir/matmul_chain.mlir"), "full").kernels[0]
    >>> kernel.order, kernel.graph.count("spacc")
    (['i', 'l', 'k', 'j'], 2)
"""
