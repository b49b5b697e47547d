"""Binding a group's ops into op instances over shared index variables, and which uses must not
share a producer.

Index variables are unified across expressions: a consumer's access `T(i,k)` of an intermediate
binds the producer's output variables to `i` and `k` (union-find over per-instance variables,
named `<instance>:<op variable>` until the region names them). When binding would force two
different variables of one op to be equal, the consumer gets its own copy of the producer: the
intermediate is recomputed for that use. A use whose merge may drop or pad coordinates of a
producer that another consumer (or the region's writer) also reads gets its own copy as well
(`filtered_shared_uses`).

    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir("tests/mlir/matmul_chain.mlir")
    >>> b = Binding(p, ["T", "O"], ["O"], BindingOptions())
    >>> [str(i.op.output) for i in b.instances], b.uf.find("0:k") == b.uf.find("1:j")
    (['O(i,j)', 'T(i,j)'], True)
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import NotSupported
from ..ir.program import Program, ops_by_output
from .coverage import operand_covers
from .instances import Instance, ProducerInput, topological
from .patterns import Intersect, Operand, Union, merge_at, operand_indices

# op instances a fused region may hold; each recomputed use of an intermediate adds its producers
# again (the built-in models' largest region has 54)
MAX_INSTANCES = 400


class UnionFind:
    """Classes of names (union by size; on equal sizes the root added first stays the root), a
    name added when first seen. `find` gives a class's root, the name it is known by.

    >>> u = UnionFind(); u.union("0:k", "1:j"); u.find("0:k") == u.find("1:j"), u.find("2:i")
    (True, '2:i')
    >>> parts = UnionFind(["i", "j", "k"]); parts.union("k", "j"); parts.find("k")
    'j'
    """

    def __init__(self, names: Iterable[str] = ()):
        self._parent: dict[str, str] = {}
        self._size: dict[str, int] = {}
        self._rank: dict[str, int] = {}  # insertion order, the tie-break between equal sizes
        for name in names:
            self.find(name)

    def find(self, x: str) -> str:
        parent = self._parent
        if x not in parent:
            parent[x], self._size[x], self._rank[x] = x, 1, len(self._rank)
            return x
        while parent[x] != x:
            parent[x] = parent[parent[x]]  # path halving
            x = parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if (self._size[ra], self._rank[rb]) < (self._size[rb], self._rank[ra]):
            ra, rb = rb, ra
        self._parent[rb] = ra
        self._size[ra] += self._size[rb]

    def copy(self) -> UnionFind:
        """An independent copy with the same roots."""
        other = UnionFind()
        other._parent, other._size, other._rank = dict(self._parent), dict(self._size), dict(self._rank)
        return other


@dataclass(frozen=True)
class PendingLeaf:
    """An input read from memory before the region has numbered its leaves."""

    tensor: str


@dataclass
class BindingOptions:
    """How a binding shares producers (`Region.build` documents each option); `no_share` and
    `private` are grown by the region until no shared producer is filtered."""

    separate_reductions: bool = False
    buffered: set | frozenset = frozenset()
    share_covered: bool = True
    isolated: set | frozenset = frozenset()
    covered: dict = field(default_factory=dict)  # dimensions each stream covers (`coverage`)
    no_share: set = field(default_factory=set)  # (consumer instance, input) uses with their own producer
    private: set = field(default_factory=set)  # ops whose every use gets its own instance


class Binding:
    """Instances of the ops producing `outputs` (and, transitively, their producers in the group),
    with the union-find `uf` over their variables and, per buffered use, the (consumer variable,
    producer variable) pairs of the dimensions it reads again (`links`)."""

    def __init__(self, program: Program, group: list[str], outputs: list[str], options: BindingOptions):
        self.ops = ops_by_output(program)
        self.program = program
        self.group = group
        self.members = set(group)
        self.options = options
        self.uf = UnionFind()
        self.instances: list[Instance] = []
        self.by_op: dict[str, list[int]] = {}
        self.links: dict = {}
        self.output_instance = {name: self.new_instance(name).id for name in outputs}
        self.apart = {self.output_instance[name] for name in options.isolated}
        # each written tensor computes its own producers: a consumer elsewhere in the region
        # that merges a shared producer (filtering or padding its streams) would change what
        # gets written
        self.owner = {inst_id: inst_id for inst_id in self.output_instance.values()}
        work = 0
        while work < len(self.instances):
            inst = self.instances[work]
            work += 1
            for k in range(len(inst.op.inputs)):
                self.bind_input(inst, k)

    def new_instance(self, name: str) -> Instance:
        if len(self.instances) >= MAX_INSTANCES:
            raise NotSupported(f"fusing these {len(self.group)} ops recomputes their producers for so many "
                               f"uses that the region exceeds {MAX_INSTANCES} op instances",
                               f"group {','.join(self.group[:3])},...", "split the group")
        inst = Instance(len(self.instances), self.ops[name])
        inst.bind_vars({v: f"{inst.id}:{v}" for v in inst.op.vars})
        for v in inst.var_of.values():
            self.uf.find(v)
        self.instances.append(inst)
        self.by_op.setdefault(name, []).append(inst.id)
        return inst

    def covers_all(self, tensor: str) -> bool:
        return len(self.options.covered[tensor]) == self.program.tensors[tensor].rank

    def shareable(self, inst: Instance, k: int) -> list[int]:
        """Instances of input k's producer that `inst` may share. A tensor the region writes out
        is never shared with in-region consumers, whose intersections would otherwise filter what
        gets written ... unless its stream covers every coordinate: no consumer can filter or pad
        it unseen (a filtering use gets its own copy, see `filtered_shared_uses`)."""
        o = self.options
        tensor = inst.op.inputs[k].tensor
        if (inst.id, k) in o.no_share or tensor in o.private:
            return []
        writers = set(self.output_instance.values())
        return [c for c in self.by_op.get(tensor, [])
                if (o.share_covered and self.covers_all(tensor) and not {self.owner.get(c), self.owner.get(inst.id)}
                    & self.apart) or (c not in writers and self.owner.get(c) == self.owner.get(inst.id))]

    def bind_input(self, inst: Instance, k: int) -> None:
        """Input k of `inst`: a pending leaf, or a producer instance (shared or new) whose output
        variables are unified with the access's."""
        access = inst.op.inputs[k]
        if access.tensor not in self.members:
            inst.operands.append(PendingLeaf(access.tensor))
            return
        shared = self.shareable(inst, k)
        if (inst.tensor, k) in self.options.buffered:  # no variables shared: nothing to unify
            chosen = self.instances[shared[0]] if shared else self.new_instance(access.tensor)
            self.owner.setdefault(chosen.id, self.owner.get(inst.id))
            self.links[inst.id, k] = [(a, b) for a, b in zip(access.indices, chosen.op.output.indices)
                                      if isinstance(a, str) and isinstance(b, str)]
        else:
            chosen = self.unify_with_producer(inst, k, shared)
        inst.operands.append(ProducerInput(chosen.id))
        chosen.consumers.append((inst.id, k))

    def unify_with_producer(self, inst: Instance, k: int, shared: list[int]) -> Instance:
        """The first shareable producer whose variables unify with the access without conflict,
        else a new instance."""
        access = inst.op.inputs[k]
        for candidate in shared + [None]:
            producer = self.instances[candidate] if candidate is not None else self.new_instance(access.tensor)
            self.owner.setdefault(producer.id, self.owner.get(inst.id))
            trial = self.uf.copy()
            for index, theirs in zip(access.indices, producer.op.output.indices):
                if isinstance(index, str) and isinstance(theirs, str):
                    trial.union(inst.var_of[index], producer.var_of[theirs])
            if candidate is None or self.conflict_free(trial, (producer.id, inst.id)):
                if candidate is None and not self.conflict_free(trial):
                    raise NotSupported(f"{access} binds two different index variables of one op "
                                       "to the same dimension (a diagonal access)")
                self.uf = trial
                return producer
        raise AssertionError("unreachable: a new instance is always chosen last")

    def conflict_free(self, u: UnionFind, edge: tuple[int, int] | None = None) -> bool:
        """No instance gets two of its variables unified; with `separate_reductions`, no instance
        iterates a variable that one of its producers (`edge` = a trial producer -> consumer link
        included) reduces."""
        for inst in self.instances:
            roots = [u.find(v) for v in inst.var_of.values()]
            if len(set(roots)) != len(roots):
                return False
        if not self.options.separate_reductions:
            return True
        for inst in self.instances:
            reduced = {u.find(inst.var_of[v]) for v in inst.op.reduce_vars}
            if reduced and any(reduced & {u.find(v) for v in self.instances[d].var_of.values()}
                               for d in self.downstream(inst.id, edge)):
                return False
        return True

    def downstream(self, start: int, edge: tuple[int, int] | None) -> set[int]:
        """Instances reachable over consumer links (the trial edge included)."""
        seen: set[int] = set()
        stack = [start]
        while stack:
            i = stack.pop()
            nxt = [c for c, _ in self.instances[i].consumers] + ([edge[1]] if edge and edge[0] == i else [])
            stack += [c for c in nxt if c not in seen]
            seen.update(nxt)
        return seen


def filtered_uses(inst: Instance, k: int, covered: dict | None = None, bg: dict | None = None) -> set[str]:
    """Variables at which consumer `inst` may change the coordinates of its operand k: drop some
    (an intersection with an operand that may lack coordinates; `covered`: the dimensions each
    tensor's stream always covers, see `coverage.covered_dims`, drop nothing) or pad it (a union
    with a part that may hold coordinates k lacks, unless k covers the variable)."""
    found = set()
    for v in set(x for x in inst.op.inputs[k].indices if isinstance(x, str)):
        ops = inst.op.inputs
        indexes = [v in a.indices for a in ops]
        # partners that drop nothing: streams covering v, and operand k itself read twice (x * x)
        covers = operand_covers(inst.op, covered or {}, v)
        full = [cov or a == ops[k] for cov, a in zip(covers, ops)]
        backgrounds = [(bg or {}).get(a.tensor, 0.0) for a in ops]
        out_bg = (bg or {}).get(inst.tensor, 0.0)
        skip = 0.0 if inst.op.reduce_vars else out_bg
        merge = merge_at(inst.op.body, indexes, backgrounds, skip, full=full)
        if _under_intersect(merge, k, full) or (not covers[k] and _padded(merge, k)):
            found.add(v)
    return found


def _under_intersect(merge, k: int, full: list[bool], inside: bool = False) -> bool:
    """Whether operand k sits under an intersection with a partner that may lack coordinates."""
    if isinstance(merge, Operand):
        return inside and merge.index == k
    parts = getattr(merge, "parts", ())
    filtering = isinstance(merge, Intersect) and any(
        not (isinstance(p, Operand) and full[p.index]) for p in parts if not (isinstance(p, Operand) and p.index == k))
    return any(_under_intersect(p, k, full, inside or filtering) for p in parts)


def _padded(merge, k: int) -> bool:
    """Whether a union joins operand k with a part that does not mention it."""
    parts = getattr(merge, "parts", ())
    if isinstance(merge, Union):
        mentions = [k in operand_indices(p) for p in parts]
        if any(mentions) and not all(mentions):
            return True
    return any(_padded(p, k) for p in parts)


def filtered_shared_uses(instances: list[Instance], covered: dict | None = None,
                         bg: dict | None = None, written: set | frozenset = frozenset()) -> set:
    """Uses (consumer id, input) that filter an instance another consumer also reads, or that
    the region writes (ids in `written`); such a use gets its own copy of the producer, since
    the filtering would otherwise reach the other reader or what gets written.
    Filtering is transitive: a filtered consumer filters the operands it streams through."""
    by_id = {i.id: i for i in instances}
    filtered: dict[int, set[str]] = {}  # instance -> local-variable names of its op it may lose
    for inst in reversed(topological(instances)):  # consumers first
        lost = set()
        for c_id, k in inst.consumers:
            consumer = by_id[c_id]
            via = filtered_uses(consumer, k, covered, bg) | filtered.get(c_id, set())
            access = consumer.op.inputs[k].indices
            mine = inst.op.output.indices
            lost |= {theirs for index, theirs in zip(access, mine) if isinstance(theirs, str) and index in via}
        filtered[inst.id] = lost
    unsafe = set()
    for inst in instances:
        if len(inst.consumers) + (inst.id in written) < 2:
            continue
        for c_id, k in inst.consumers:
            consumer = by_id[c_id]
            via = filtered_uses(consumer, k, covered, bg) | filtered.get(c_id, set())
            if set(consumer.op.inputs[k].indices) & via:
                unsafe.add((c_id, k))
    return unsafe

