"""How `fuseflow orders` lists a group's dataflow orders: first how many are valid, then the valid
orders as a walk over prefixes finds them (the numbers `order.N=#k` picks by), at most `limit`.

Counting walks at most `COUNT_WORK` prefixes; a group with more says how many orders respect the
storage orders instead (counted exactly over sets of placed variables) and lists as it goes.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> r = Region.build(from_mlir("tests/mlir/matmul_chain.mlir"), ["T", "O"])
    >>> print("\\n".join(order_listing(r, "group 0", limit=2, chosen=["i", "k", "l", "j"])))
    group 0: 6 valid orders of i,j,k,l
        #0 i,k,j,l                  cost 1.55e+05
        #1 i,k,l,j                  cost 1.1e+04    <- default
      ... (the first 2; --limit 0 lists all)
"""
from __future__ import annotations

import itertools

from .cost import nest_cost
from .nesting import Nesting, OrderWalk, count_orders, topological_orders
from .region import Region

COUNT_WORK = 20_000  # prefixes walked to count the valid orders before listing them


def order_listing(region: Region, title: str, limit: int = 50, verbose: bool = False, chosen=None,
                  mark: str = "default", note: str = ""):
    """Lines: `title` with the count (and `note`), then `#k order cost C` for the valid orders (at
    most `limit`; 0: all; the estimated loop work, `fusion.cost.nest_cost`, weighed by the data
    when `region.stats` has it), the `chosen` one marked `<- mark`, and with `verbose` up to
    `limit` rejected orders with the reason."""
    names = ",".join(region.vars)
    counter = OrderWalk(region, COUNT_WORK)
    valid = sum(1 for _ in counter.orders())
    candidates = count_orders(region)
    respecting = f"{candidates:,}" if candidates is not None else "very many"
    if counter.finished:
        extra = f" (of {respecting} that respect the storage orders)" if candidates != valid else ""
        yield f"{title}: {valid:,} valid orders of {names}{extra}{note}"
        if not valid:
            yield f"  none: {counter.why_none()}"
    else:
        yield f"{title}: more than {valid:,} valid orders of {names} ({respecting} respect the storage orders); " \
              f"listed as they are found{note}"
    for n, order in enumerate(OrderWalk(region).orders()):
        if limit and n >= limit:
            yield f"  ... (the first {limit}; --limit 0 lists all)"
            break
        flag = f"  <- {mark}" if order == chosen else ""
        yield f"  {f'#{n}':>4} {','.join(order):<24} cost {nest_cost(Nesting(region, order)):<9.3g}{flag}".rstrip()
    if verbose:
        rejected = ((order, Nesting(region, order).problem) for order in topological_orders(region))
        rejected = (pair for pair in rejected if pair[1])
        for order, problem in itertools.islice(rejected, limit or None):
            yield f"  -- {','.join(order)}: {problem}"
