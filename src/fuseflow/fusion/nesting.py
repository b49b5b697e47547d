"""How each op instance of a region nests in a dataflow (loop) order, and whether the lowering
supports that order.

An instance iterates its own variables plus the variables of its consumers that come before
its last variable in the order (`nest`): a producer placed inside a consumer's extra loop is
recomputed for every iteration of it. Reductions become `reduce` nodes when the reduction
variables are innermost in the nest, or an order-1 sparse accumulator when exactly one
non-reduction variable follows the reduction variable (order 2 with two, for written outputs).
An order the lowering does not support gets a `Rejection`, one of `REASONS`.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> p = from_mlir("tests/mlir/matmul_chain.mlir")
    >>> r = Region.build(p, ["T", "O"])
    >>> n = Nesting(r, ["i", "l", "k", "j"])
    >>> [(inst.tensor, n.nest[inst.id], str(n.plan[inst.id])) for inst in r.instances]
    [('T', ['i', 'l', 'k'], 'spacc[l]'), ('O', ['i', 'k', 'j'], 'spacc[k]')]
    >>> masked = Region.build(from_mlir("tests/mlir/sddmm_masked.mlir"), ["P", "O"])
    >>> [str(i) for i in masked.instances]
    ['P(i,j) = sum[k] A(i,k) * B(k,j)', 'O(i,j) = S(i,j) * P(i,j)']
    >>> Nesting(masked, ["k", "i", "j"]).rejection.reason
    'accumulator-feeds-consumer'
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UserError
from .region import Region

# Why an order (or a prefix of one, `Nesting(partial=True)`) is rejected. The first two are
# found only for prefixes; they predict a rejection of every order extending the prefix, as the
# last two do for a prefix where an accumulator or a buffered read waits on a producer that still
# has a loop to place.
REASONS = {
    "open-reduction": "a prefix places a reduction variable with more loops inside it than an accumulator takes",
    "open-nesting": "a prefix nests a producer in a loop that its consumer will not iterate",
    "accumulator-feeds-consumer": "an order-2 sparse accumulator would feed a fused consumer",
    "accumulator-order-3": "a reduction would need a sparse accumulator of order 3 or more",
    "consumer-lacks-loop": "a producer iterates a loop that its consumer does not",
    "buffer-transposed": "a buffered read would visit its producer's values transposed",
    "buffer-everything": "a buffer would have to hold all of its producer",
    "replayed-values": "a producer's values would have to be replayed inside a consumer's inner loop",
    "output-recomputed": "a written output would be recomputed inside an extra loop",
    "accumulator-incomplete": "an accumulator's output is read before its inputs are complete",
    "buffer-incomplete": "a buffered read starts before its producer is complete",
}


@dataclass(frozen=True)
class Rejection:
    """Why the lowering does not support an order: a key of `REASONS` and the message."""

    reason: str
    text: str

    def __post_init__(self):
        assert self.reason in REASONS, self.reason


@dataclass(frozen=True)
class ReducePlan:
    """How an instance reduces: `none` (no reduction), `reduce` (the reduction variables are
    innermost), `spacc` (an order-1 sparse accumulator over `var`), `spacc2` (order 2 over `var`
    with the inner loops `inner` = (mid, last)) or `unsupported`."""

    kind: str
    var: str | None = None
    inner: tuple = ()

    @property
    def accumulates(self) -> bool:
        return self.kind in ("spacc", "spacc2")

    def __str__(self) -> str:
        return f"{self.kind}[{self.var}]" if self.var is not None else self.kind


NO_REDUCTION = ReducePlan("none")


class Nesting:
    """The nests and reduction plans of `order`. With `partial=True`, `order` may be a prefix of
    an order: only instances whose variables are all placed are analysed, and only the checks
    whose instances are all analysed run, so a problem found for a prefix holds for every
    order that extends it (the order search prunes with this)."""

    def __init__(self, region: Region, order: list[str], partial: bool = False, parent: Nesting | None = None):
        self.region = region
        self.order = list(order)
        if not partial and sorted(order) != sorted(region.vars):
            raise UserError(f"order {','.join(order)} must list each of {','.join(region.vars)} once")
        self.pos = {v: k for k, v in enumerate(order)}
        self.scope = region.index.scopes
        self.last: dict[int, str] = {}
        self.nest: dict[int, list[str]] = {}
        self.plan: dict[int, ReducePlan] = {}
        self.value_vars: dict[int, list[str]] = {}
        self.rejection: Rejection | None = None
        self.analysed: list = []  # instances whose variables are all placed, producers first
        self.placed_count: dict[int, int] = {}  # per instance using a placed variable: how many it has placed
        # `parent`: the valid Nesting of this order less its last variable, whose analysed
        # instances and checks among them hold unchanged (only what the last variable touches is redone)
        assert parent is None or (parent.valid and parent.order == self.order[:-1]), "not the parent prefix"
        self.fresh = {inst.id for inst in region.instances} if parent is None else set()
        open_instances = self._analyse(parent)
        for inst in open_instances:
            if self.rejection is not None:
                break
            if parent is None or self.order[-1] in self.scope[inst.id]:
                self._check_open_nesting(inst)
        if self.rejection is None:
            self._check_values()
        if self.rejection is None:
            self._check_outputs()
        if self.rejection is None:
            self._check_accumulators()

    def _analyse(self, parent: Nesting | None) -> list:
        """Nest and plan every instance whose variables are all placed; the others (of a
        prefix) are returned after checking their reductions so far. With a `parent`, the
        instances it analysed are copied and the open ones checked again only where the last
        variable is in their scope."""
        index = self.region.index
        counts = index.var_counts
        if parent is None:
            placed: dict[int, int] = {inst_id: 0 for inst_id, count in counts.items() if count == 0}
            for v in self.order:  # only instances that use a placed variable need a look
                for inst_id in index.users.get(v, ()):
                    placed[inst_id] = placed.get(inst_id, 0) + 1
        else:
            placed = dict(parent.placed_count)
            for inst_id in index.users.get(self.order[-1], ()):
                placed[inst_id] = placed.get(inst_id, 0) + 1
        self.placed_count = placed
        newest = self.order[-1] if self.order else None
        open_instances = []
        for inst_id in sorted(placed, key=index.topo.__getitem__):
            inst = self.region.instance(inst_id)
            if placed[inst_id] < counts[inst_id]:
                if self.rejection is None and (parent is None or newest in self.scope[inst_id]):
                    self._check_open_reduction(inst)  # a prefix that does not place all of its variables yet
                open_instances.append(inst)
                continue
            self.analysed.append(inst)
            if parent is not None and inst_id in parent.last:  # complete before the last variable: unchanged
                self.last[inst_id], self.nest[inst_id] = parent.last[inst_id], parent.nest[inst_id]
                self.plan[inst_id], self.value_vars[inst_id] = parent.plan[inst_id], parent.value_vars[inst_id]
                continue
            self.fresh.add(inst_id)
            last = max(inst.local_vars, key=self.pos.get) if inst.local_vars else None
            self.last[inst.id] = last
            limit = self.pos[last] if last is not None else -1
            scope = self.scope[inst.id]
            nest = [v for v in self.order[:limit + 1] if v in scope]  # the scope's loops up to `last`, in order
            self.nest[inst.id] = nest
            self.plan[inst.id] = self._plan(inst, nest)
            self.value_vars[inst.id] = [v for v in nest if v not in inst.reduce_vars]
        return open_instances

    @property
    def problem(self) -> str | None:
        """The rejection's message, or None for a supported order."""
        return self.rejection.text if self.rejection is not None else None

    @property
    def valid(self) -> bool:
        return self.rejection is None

    def _fail(self, reason: str, text: str) -> None:
        if self.rejection is None:
            self.rejection = Rejection(reason, text)

    def _check_open_reduction(self, inst) -> None:
        """For a prefix: an instance that has placed a reduction variable but not all of its own
        variables will nest every unplaced one of them after it, besides the placed loops after it
        (its last variable, not yet placed, comes later); too many for an accumulator is a problem
        for every order that extends the prefix."""
        red = [v for v in inst.reduce_vars if v in self.pos]
        if not red:
            return
        first = min(self.pos[v] for v in red)
        own = self.region.index.local_vars[inst.id]
        after = [v for v in self.scope[inst.id] if v not in inst.reduce_vars and
                 (self.pos[v] > first if v in self.pos else v in own)]
        if (len(inst.reduce_vars) > 1 and after) or len(after) > 2 or (len(after) == 2 and inst.consumers):
            self._fail("open-reduction", f"{inst.tensor} reduces {','.join(red)} with {len(after)} loops inside it")

    def _check_open_nesting(self, inst) -> None:
        """For a prefix: an instance with an unplaced variable of its own will be nested inside
        every placed loop of its consumers (its last variable comes later), so its values vary
        along them; a consumer that will not iterate such a loop cannot read it (`_check_values`)."""
        own = self.region.index.local_vars[inst.id]
        outer = [v for v in self.scope[inst.id] if v in self.pos and v not in own]
        for consumer_id, _ in inst.consumers:
            reach = self.nest.get(consumer_id)
            if reach is None:  # not placed yet: it will iterate at most its scope
                reach = self.scope[consumer_id]
            missing = [v for v in outer if v not in reach]
            if missing:
                self._fail("open-nesting", f"{inst.tensor} iterates {','.join(sorted(missing))} that "
                           f"{self.region.instance(consumer_id).tensor} does not")
                return

    def _plan(self, inst, nest: list[str]) -> ReducePlan:
        red = inst.reduce_vars
        if not red:
            return NO_REDUCTION
        first = min(self.pos[v] for v in red)
        after = [v for v in nest if self.pos[v] > first]
        if all(v in red for v in after):
            return ReducePlan("reduce")
        if len(red) == 1 and len(after) == 1:
            return ReducePlan("spacc", red[0])
        if len(red) == 1 and len(after) == 2:
            if inst.consumers:
                self._fail("accumulator-feeds-consumer", f"{inst.tensor} needs an order-2 sparse accumulator, "
                           "whose outer output cannot feed a fused consumer")
            return ReducePlan("spacc2", red[0], tuple(after))
        self._fail("accumulator-order-3", f"{inst.tensor} reduces {','.join(red)} with "
                   f"{','.join(v for v in after if v not in red)} inside it (needs a sparse accumulator of order >= 3)")
        return ReducePlan("unsupported")

    def _check_values(self) -> None:
        """Each consumer reads its producers' values in loops it iterates, in order, without
        replaying them inside loops of its own."""
        for inst in self.analysed:
            for consumer_id, k in inst.consumers:
                if consumer_id in self.nest and (inst.id in self.fresh or consumer_id in self.fresh):
                    self._check_read(inst, self.region.instance(consumer_id), k)

    def _check_read(self, inst, consumer, k: int) -> None:
        vs = self.value_vars[inst.id]
        nest = self.nest[consumer.id]
        rename = consumer.rename.get(k, {})
        seen = [rename.get(v, v) for v in vs]  # a buffered read runs loops of its own
        if not set(seen) <= set(nest):
            self._fail("consumer-lacks-loop", f"{inst.tensor} iterates {','.join(sorted(set(seen) - set(nest)))} "
                       f"that {consumer.tensor} does not")
            return
        if rename and sorted(seen, key=self.pos.get) != seen:
            self._fail("buffer-transposed", f"{consumer.tensor} would read the buffered {inst.tensor} transposed")
            return
        if vs and vs[0] in rename:  # a buffer holds what one iteration of a shared loop makes
            self._fail("buffer-everything", f"{consumer.tensor} would buffer all of {inst.tensor}")
            return
        if seen:
            limit = self.pos[seen[-1]]
            inner = [v for v in nest if self.pos[v] <= limit and v not in seen]
            if inner:
                self._fail("replayed-values", f"the values of {inst.tensor} would have to be replayed inside "
                           f"{','.join(inner)} for {consumer.tensor}")

    def _check_outputs(self) -> None:
        """A written output's values vary along its own variables only."""
        for name, inst_id in self.region.output_instance.items():
            if inst_id not in self.nest or inst_id not in self.fresh:
                continue
            inst = self.region.instance(inst_id)
            out_vars = [v for v in inst.out_indices if isinstance(v, str)]
            if sorted(self.value_vars[inst_id]) != sorted(out_vars):
                extra = sorted(set(self.value_vars[inst_id]) - set(out_vars))
                self._fail("output-recomputed", f"output {name} is recomputed inside {','.join(extra)} "
                           "and cannot be written")

    def _check_accumulators(self) -> None:
        """A consumer reads an accumulator's output at the accumulator's innermost variable, so the
        accumulator's inputs must be complete by then (not only after a later variable). In a
        prefix, an instance with a variable still to place completes after every placed loop."""
        done = self._completion()
        for inst in self.analysed:
            if inst.id not in done:
                continue
            if self.plan[inst.id].accumulates and inst.consumers and done[inst.id] > self.pos[self.last[inst.id]]:
                self._fail("accumulator-incomplete", f"the accumulated {inst.tensor} is read at "
                           f"{self.last[inst.id]} but its inputs complete only at {self._loop(done[inst.id])}")
            for k, rename in inst.rename.items():  # a buffered read starts once its producer is complete
                ref = inst.operands[k].producer
                first = min(self.pos[v] for v in rename.values())
                if ref in done and done[ref] >= first:
                    self._fail("buffer-incomplete", f"{inst.tensor} reads {self.region.instance(ref).tensor} "
                               f"again in loop {self.order[first]} before it is complete (at {self._loop(done[ref])})")

    def _completion(self) -> dict[int, float]:
        """Per analysed instance, the position of the loop where it and its producers are all
        complete (infinite: a later loop, for a producer with a variable still to place); none
        for an instance with a producer outside the region (a part of one, `proof`)."""
        done: dict[int, float] = {}
        analysed = {inst.id for inst in self.analysed}
        inside = {inst.id for inst in self.region.instances}
        for inst in self.analysed:  # producers first
            ends = [self.pos.get(self.last[inst.id], -1)]
            for ref in inst.producer_ids():
                if ref in done:
                    ends.append(done[ref])
                elif ref in inside and ref not in analysed:
                    ends.append(math.inf)  # open: completes after every placed loop
                else:
                    break
            else:
                done[inst.id] = max(ends)
        return done

    def _loop(self, position: float) -> str:
        return self.order[int(position)] if position != math.inf else "a loop still to be placed"


def storage_conflicts(region: Region, order: list[str]) -> list[tuple[str, str]]:
    """The pairs of `region.before` (stored level order) that a full `order` visits the wrong way."""
    return [(a, b) for a, b in region.before if order.index(a) > order.index(b)]


def topological_orders(region: Region):
    """Every order of the region's variables that respects its storage constraints, generated
    by backtracking over the variables in first-use order (index 0 is the most natural order)."""
    preds = {v: {a for a, b in region.before if b == v} for v in region.vars}
    return part_orders(list(region.vars), preds)


def part_orders(names: list[str], preds: dict):
    """Orders of `names` with each variable after its `preds`, by backtracking in list order."""
    chosen: list[str] = []
    used: set[str] = set()

    def extend():
        if len(chosen) == len(names):
            yield list(chosen)
            return
        for v in names:
            if v not in used and preds[v] <= used:
                chosen.append(v)
                used.add(v)
                yield from extend()
                chosen.pop()
                used.discard(v)

    yield from extend()


def valid_orders(region: Region):
    """Topological orders that the lowering supports (see `Nesting.rejection` for the others),
    in `topological_orders`' sequence; a prefix that `Nesting(partial=True)` rejects is not
    extended (`OrderWalk`)."""
    yield from OrderWalk(region).orders()


class OrderWalk:
    """Depth-first walk over the prefixes of the region's topological orders, dropping a prefix
    as soon as `Nesting(partial=True)` rejects it (a rejection of a prefix holds for every order
    extending it). It counts the prefixes it visits (`visited`) and keeps the rejection of the
    longest prefix it dropped (`furthest`): when the walk ends without an order, that is why
    none exists. A `screen` may drop prefixes first: it says why a prefix cannot be extended to
    a valid order, or None. `preds` (each variable's variables that must come before it) replaces
    the storage constraints, with more of them (`precedence.loop_precedences`)."""

    def __init__(self, region: Region, work: int | None = None, screen=None, preds: dict | None = None):
        self.region = region
        self.names = list(region.vars)
        self.preds = preds if preds is not None else {v: {a for a, b in region.before if b == v} for v in self.names}
        self.work = work  # prefixes the walk may visit (None: as many as there are)
        self.screen = screen
        self.visited = 0
        self.furthest: tuple[list[str], str] | None = None

    @property
    def finished(self) -> bool:
        """Whether the walk stayed within its work (so what it did not find does not exist)."""
        return self.work is None or self.visited <= self.work

    def orders(self):
        chosen: list[str] = []
        used: set[str] = set()

        def extend():
            if len(chosen) == len(self.names):
                yield list(chosen)
                return
            for v in self.names:
                if v in used or not self.preds[v] <= used:
                    continue
                self.visited += 1
                if not self.finished:
                    return
                chosen.append(v)
                why = self.screen(chosen) if self.screen is not None else None
                if why is None:
                    why = Nesting(self.region, chosen, partial=len(chosen) < len(self.names)).problem
                if why is None:
                    used.add(v)
                    yield from extend()
                    used.discard(v)
                elif self.furthest is None or len(chosen) > len(self.furthest[0]):
                    self.furthest = (list(chosen), why)
                chosen.pop()

        yield from extend()

    def first(self) -> list[str] | None:
        """The first valid order, or None (none exists if the walk is `finished`)."""
        return next(iter(self.orders()), None)

    def why_none(self) -> str:
        """Why the walk found no order: the storage orders conflict, or the rejection of the
        longest prefix it reached."""
        cycle = storage_cycle(self.region)
        if cycle:
            return cycle
        if self.furthest is None:
            return "no order was tried"
        prefix, why = self.furthest
        example = ",".join(prefix) if len(prefix) == len(self.names) else f"orders starting {','.join(prefix)}"
        return f"no order of {','.join(self.names)} is supported, e.g. {example}: {why}"


def storage_cycle(region: Region) -> str | None:
    """A description of a cycle in the stored level orders (`region.before`), or None."""
    succ: dict[str, set[str]] = {}
    for a, b in region.before:
        succ.setdefault(a, set()).add(b)
    for a, b in sorted(region.before):
        path = _path(succ, b, a)
        if path is not None:
            loop = [a] + path
            return "the storage orders conflict: " + "; ".join(
                f"{_holder(region, x, y)} stores {x} before {y}" for x, y in zip(loop, loop[1:]))
    return None


def _holder(region: Region, a: str, b: str) -> str:
    """The stored tensor (or output) whose levels put `a` right above `b`."""
    for leaf in region.leaves:
        levels = [v for v in leaf.level_vars() if isinstance(v, str)]
        if not leaf.free and not leaf.format.is_dense and (a, b) in zip(levels, levels[1:]):
            return str(leaf)
    return "a declared output format"


def _path(succ: dict, start: str, goal: str) -> list[str] | None:
    """A path start -> ... -> goal over `succ`, or None."""
    stack, seen = [(start, [start])], {start}
    while stack:
        node, path = stack.pop()
        if node == goal:
            return path
        for nxt in sorted(succ.get(node, ())):
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def count_orders(region: Region, limit: int = 1 << 18) -> int | None:
    """How many orders respect the stored level orders (linear extensions of `region.before`),
    counted over the sets of placed variables; None when there are more than `limit` such sets."""
    names = list(region.vars)
    bit = {v: 1 << k for k, v in enumerate(names)}
    need = [sum(bit[a] for a, b in region.before if b == v) for v in names]
    ways = {0: 1}
    for _ in names:
        nxt: dict[int, int] = {}
        for placed, count in ways.items():
            for k, v in enumerate(names):
                if not placed & bit[v] and need[k] & placed == need[k]:
                    nxt[placed | bit[v]] = nxt.get(placed | bit[v], 0) + count
        if len(nxt) > limit:
            return None
        ways = nxt
    return sum(ways.values())


def order_problem(region: Region, order: list[str]) -> str | None:
    """Why `order` cannot be used for `region`, or None."""
    bad = storage_conflicts(region, order) if sorted(order) == sorted(region.vars) else []
    if bad:
        a, b = sorted(bad)[0]
        holders = [str(leaf) for leaf in region.leaves  # the leaves that constrain orders (`Region.before`)
                   if a in leaf.level_vars() and b in leaf.level_vars() and not leaf.free and not leaf.format.is_dense]
        what = f"mode order of {holders[0].split('(')[0]}" if holders else "the declared output format"
        return f"order {','.join(order)} violates the {what} ({a} before {b})"
    return Nesting(region, order).problem
