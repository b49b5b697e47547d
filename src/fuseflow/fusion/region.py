"""A fused region: the ops of one schedule group as op *instances* over shared index variables.

Index variables are unified across expressions: a consumer's access `T(i,k)` of an intermediate
binds the producer's output variables to `i` and `k` (union-find over per-instance variables).
When binding would force two different variables of one op to be equal (e.g. GraphSAGE's
`h(i,f)` and `A(i,k)·h(k,f)` in one group), the consumer gets its own copy of the producer:
the intermediate is recomputed for that use.

    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir("tests/mlir/matmul_chain.mlir")
    >>> r = Region.build(p, [op.output.tensor for op in p.ops])
    >>> r.vars, [str(i) for i in r.instances]
    (['i', 'j', 'k', 'l'], ['T(i,k) = sum[l] A(i,l) * B(l,k)', 'O(i,j) = sum[k] T(i,k) * C(k,j)'])
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import NotSupported, UserError
from ..ir.formats import TensorFormat
from ..ir.program import Access, IndexOp, Program, op_output
from .coverage import covered_dims, operand_covers


# op instances a fused region may hold; each recomputed use of an intermediate adds its producers
# again (the built-in models' largest region has 54)
MAX_INSTANCES = 400


@dataclass
class Leaf:
    """One access of a tensor that the region reads from memory."""

    id: int
    tensor: str
    indices: tuple  # logical variable names, or 0 for a constant index
    format: TensorFormat
    shape: tuple
    free: bool = False  # layout follows the dataflow order (data is laid out to match it)
    storage: str = ""  # name of the stored copy the graph reads (tensor, or tensor@order)

    def __post_init__(self):
        self.storage = self.storage or self.tensor

    def induce(self, pos: dict[str, int]) -> None:
        """Store the levels in the order the dataflow order visits the dimensions."""
        dims = sorted(range(len(self.indices)),
                      key=lambda d: (pos[self.indices[d]] if isinstance(self.indices[d], str) else len(pos), d))
        self.format = TensorFormat(self.format.levels, tuple(dims), self.format.block)
        natural = tuple(range(len(dims)))
        self.storage = self.tensor if tuple(dims) == natural else f"{self.tensor}@{','.join(map(str, dims))}"

    def level_vars(self) -> list:
        """Variables (or 0) of the stored levels, outermost first."""
        return [self.indices[d] for d in self.format.mode_order]

    def __str__(self) -> str:
        return f"{self.tensor}({','.join(str(i) for i in self.indices)})"


@dataclass
class Instance:
    id: int
    op: IndexOp
    var_of: dict[str, str] = field(default_factory=dict)  # op-local variable -> logical variable
    operands: list = field(default_factory=list)  # per input: ("leaf", id) or ("inst", id)
    consumers: list = field(default_factory=list)  # (instance id, input index)
    # per buffered input: producer variable -> this instance's variable for the same dimension
    # (the producer's finished values are read again in a later loop, see `Region.build`)
    rename: dict = field(default_factory=dict)

    @property
    def tensor(self) -> str:
        return self.op.output.tensor

    @property
    def local_vars(self) -> list[str]:
        cached = self.__dict__.get("_local")
        if cached is None or cached[0] is not self.var_of:  # var_of is replaced, never edited
            cached = self.__dict__["_local"] = (self.var_of, [self.var_of[v] for v in self.op.vars],
                                                [self.var_of[v] for v in self.op.reduce_vars])
        return cached[1]

    @property
    def out_indices(self) -> tuple:
        return tuple(self.var_of[i] if isinstance(i, str) else i for i in self.op.output.indices)

    @property
    def reduce_vars(self) -> list[str]:
        self.local_vars  # noqa: B018 (fills the cache)
        return self.__dict__["_local"][2]

    def access(self, k: int) -> tuple:
        return tuple(self.var_of[i] if isinstance(i, str) else i for i in self.op.inputs[k].indices)

    def __str__(self) -> str:
        renamed = IndexOp(Access(self.tensor, self.out_indices),
                          tuple(Access(a.tensor, self.access(k)) for k, a in enumerate(self.op.inputs)),
                          self.op.body, tuple(self.reduce_vars), self.op.reduce_kind, self.op.init)
        return str(renamed)


class _UnionFind:
    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra

    def copy(self) -> "_UnionFind":
        other = _UnionFind()
        other.parent = dict(self.parent)
        return other


@dataclass
class Region:
    program: Program
    group: list[str]  # output tensor names of the group's ops
    outputs: list[str]  # tensors the region writes to memory
    instances: list[Instance]
    leaves: list[Leaf]
    vars: list[str]
    extent: dict[str, int]
    output_instance: dict[str, int]
    before: set[tuple[str, str]]  # partial order: (a, b) means a must come before b
    shapes: dict = field(default_factory=dict)  # resolved shapes of the program's tensors
    background: dict = field(default_factory=dict)  # value of each tensor where it stores nothing
    stats: object = None  # data statistics (`ir.stats.DataStats`) the order search may weigh loops by
    variant: dict = field(default_factory=dict)  # how `build` shared and copied producers (its options)

    @staticmethod
    def build(program: Program, group: list[str], outputs: list[str] | None = None,
              formats: dict[str, TensorFormat] | None = None, shapes: dict | None = None,
              free: set[str] | frozenset = frozenset(), separate_reductions: bool = False,
              buffered: set | frozenset = frozenset(), share_covered: bool = True,
              isolated: set | frozenset = frozenset()) -> "Region":
        """Instances, logical variables and ordering constraints for the ops producing `group`.

        `outputs` defaults to the group's tensors read outside the group or returned by the program;
        `formats` gives the storage of tensors that differs from the program's declaration;
        tensors in `free` are laid out in whatever mode order the dataflow order needs.
        `separate_reductions`: a consumer downstream of a reduction over a variable never shares
        that variable (it gets its own copy of the producer): more recomputation, but orders
        exist where a fused chain reduces the same dimension twice (layer norm, then a product).
        `buffered`: uses (consumer op's tensor, input) that read their producer's finished values
        in loops of their own instead of sharing its variables (`Instance.rename`): the row a
        layer norm normalises, read again by the residual after the feed-forward network
        reduced and rebuilt that dimension. `buffer_candidates` lists the uses to try.
        `share_covered`: written outputs and their consumers share producers whose streams cover
        every coordinate (see `coverage`); without it each written output computes its own
        (where one output is needed head-major and another row-major, only copies nest apart);
        outputs in `isolated` do so even with it.
        """
        ops = {op_output(op): op for op in program.ops}
        for name in group:
            if name not in ops:
                raise UserError(f"{name} is not computed by an op of program {program.name}")
            if not isinstance(ops[name], IndexOp):
                raise NotSupported(f"fusing the reshape producing {name} (a reshape must be its own group)")
        members = set(group)
        if outputs is None:
            read_outside = {t for op in program.ops if op_output(op) not in members for t in op.tensors_read}
            outputs = [n for n in group if n in read_outside or n in program.outputs]
        formats = formats or {}
        shapes = shapes or {n: t.shape for n, t in program.tensors.items()}

        def bind(no_share: set, private: set):
            links: dict = {}  # buffered use -> (consumer local variable, producer local variable) pairs
            uf = _UnionFind()
            instances: list[Instance] = []
            by_op: dict[str, list[int]] = {}

            def new_instance(name: str) -> Instance:
                if len(instances) >= MAX_INSTANCES:
                    raise NotSupported(f"fusing these {len(group)} ops recomputes their producers for so many "
                                       f"uses that the region exceeds {MAX_INSTANCES} op instances",
                                       f"group {','.join(group[:3])},...", "split the group")
                inst = Instance(len(instances), ops[name])
                inst.var_of = {v: f"{inst.id}:{v}" for v in inst.op.vars}
                for v in inst.var_of.values():
                    uf.find(v)
                instances.append(inst)
                by_op.setdefault(name, []).append(inst.id)
                return inst

            def conflict_free(u: _UnionFind, edge: tuple[int, int] | None = None) -> bool:
                """No instance gets two of its variables unified; with `separate_reductions`, no
                instance iterates a variable that one of its producers (`edge` = a trial producer
                -> consumer link included) reduces."""
                for inst in instances:
                    roots = [u.find(v) for v in inst.var_of.values()]
                    if len(set(roots)) != len(roots):
                        return False
                if not separate_reductions:
                    return True

                def downstream(start: int) -> set[int]:
                    """Instances reachable over consumer links (the trial edge included)."""
                    seen: set[int] = set()
                    stack = [start]
                    while stack:
                        i = stack.pop()
                        nxt = [c for c, _ in instances[i].consumers] + ([edge[1]] if edge and edge[0] == i else [])
                        stack += [c for c in nxt if c not in seen]
                        seen.update(nxt)
                    return seen

                for inst in instances:
                    reduced = {u.find(inst.var_of[v]) for v in inst.op.reduce_vars}
                    if reduced and any(reduced & {u.find(v) for v in instances[d].var_of.values()}
                                       for d in downstream(inst.id)):
                        return False
                return True

            output_instance = {name: new_instance(name).id for name in outputs}
            apart = {output_instance[name] for name in isolated}
            # each written tensor computes its own producers: a consumer elsewhere in the region
            # that merges a shared producer (filtering or padding its streams) would change what
            # gets written
            owner = {inst_id: inst_id for inst_id in output_instance.values()}
            work = 0
            while work < len(instances):
                inst = instances[work]
                work += 1
                for k, access in enumerate(inst.op.inputs):
                    if access.tensor not in members:
                        inst.operands.append(("leaf", access.tensor))
                        continue
                    chosen = None
                    # a tensor the region writes out is never shared with in-region consumers, whose
                    # intersections would otherwise filter what gets written
                    # ... unless its stream covers every coordinate: no consumer can filter or pad it
                    # unseen (a filtering use is found below and gets its own copy)
                    shared = [c for c in by_op.get(access.tensor, []) if (inst.id, k) not in no_share
                              and access.tensor not in private and ((share_covered and covers_all(access.tensor)
                                                                     and not {owner.get(c), owner.get(inst.id)} & apart) or (
                                  c not in output_instance.values() and owner.get(c) == owner.get(inst.id)))]
                    if (inst.tensor, k) in buffered:  # no variables shared: nothing to unify
                        chosen = instances[shared[0]] if shared else new_instance(access.tensor)
                        owner.setdefault(chosen.id, owner.get(inst.id))
                        links[inst.id, k] = [(a, b) for a, b in zip(access.indices, chosen.op.output.indices)
                                             if isinstance(a, str) and isinstance(b, str)]
                        inst.operands.append(("inst", chosen.id))
                        chosen.consumers.append((inst.id, k))
                        continue
                    for candidate in shared + [None]:
                        producer = instances[candidate] if candidate is not None else new_instance(access.tensor)
                        owner.setdefault(producer.id, owner.get(inst.id))
                        trial = uf.copy()
                        for index, theirs in zip(access.indices, producer.op.output.indices):
                            if isinstance(index, str) and isinstance(theirs, str):
                                trial.union(inst.var_of[index], producer.var_of[theirs])
                        if candidate is None or conflict_free(trial, (producer.id, inst.id)):
                            if candidate is None and not conflict_free(trial):
                                raise NotSupported(f"{access} binds two different index variables of one op "
                                                   "to the same dimension (a diagonal access)")
                            uf.parent = trial.parent
                            chosen = producer
                            break
                    inst.operands.append(("inst", chosen.id))
                    chosen.consumers.append((inst.id, k))
            return instances, uf, output_instance, links

        from ..ir.background import backgrounds as _backgrounds

        program_bg = _backgrounds(program)
        covered = covered_dims(program, members, formats, program_bg, free)

        def covers_all(tensor: str) -> bool:
            return len(covered[tensor]) == program.tensors[tensor].rank
        no_share: set = set()  # (consumer instance, input) uses that get their own producer
        private: set = set()  # ops whose every use gets its own instance
        while True:
            instances, uf, output_instance, links = bind(no_share, private)
            unsafe = _filtered_shared_uses(instances, covered, program_bg, set(output_instance.values()))
            if not unsafe:
                break
            if unsafe <= no_share:  # no progress: copy those producers for every use
                by_id = {i.id: i for i in instances}
                grown = private | {by_id[c].op.inputs[k].tensor for c, k in unsafe}
                if grown == private:
                    raise NotSupported("an intermediate read by several fused consumers that filter it "
                                       "differently", f"group {group}", "split the group")
                private = grown
            no_share |= unsafe
        # logical variable names: the op-local name of the first instance that uses the class
        names: dict[str, str] = {}
        taken: set[str] = set()
        for inst in instances:
            for v in inst.op.vars:
                root = uf.find(inst.var_of[v])
                if root not in names:
                    name = v
                    if name in taken:
                        unused = [c for c in "ijklmnpqrstuvwabcdefgh" if c not in taken]
                        name = unused[0] if unused else f"{v}{len(taken)}"
                    names[root] = name
                    taken.add(name)
        for inst in instances:
            inst.var_of = {v: names[uf.find(x)] for v, x in inst.var_of.items()}
        for (inst_id, k), pairs in links.items():
            inst = instances[inst_id]
            producer = instances[inst.operands[k][1]]
            rename = {producer.var_of[b]: inst.var_of[a] for a, b in pairs if producer.var_of[b] != inst.var_of[a]}
            if rename:
                inst.rename[k] = rename
        order_seen = []
        for inst in instances:
            for v in inst.local_vars:
                if v not in order_seen:
                    order_seen.append(v)
        # leaves
        leaves: list[Leaf] = []
        for inst in instances:
            for k, (kind, ref) in enumerate(inst.operands):
                if kind == "leaf":
                    tensor = program.tensors[ref]
                    leaf = Leaf(len(leaves), ref, inst.access(k), formats.get(ref, tensor.format),
                                tuple(shapes[ref]), free=ref in free)
                    leaves.append(leaf)
                    inst.operands[k] = ("leaf", leaf.id)
        extent: dict[str, int] = {}
        for inst in instances:
            dims = [(inst.access(k), shapes[a.tensor]) for k, a in enumerate(inst.op.inputs)]
            dims.append((inst.out_indices, shapes[inst.tensor]))
            for idx, shape in dims:
                for v, d in zip(idx, shape):
                    if isinstance(v, str) and d is not None:
                        extent.setdefault(v, d)
        missing = [v for v in order_seen if v not in extent]
        if missing:
            raise UserError(f"the size of index variable {missing[0]} is unknown", f"group {group}",
                            "supply data for inputs with dynamic dimensions")
        before: set[tuple[str, str]] = set()
        for leaf in leaves:
            level_vars = [v for v in leaf.level_vars() if isinstance(v, str)]
            if len(set(level_vars)) != len(level_vars):
                raise NotSupported(f"{leaf} indexes two of its levels with one variable (a diagonal)")
            if not leaf.free and not leaf.format.is_dense:  # dense: random access in any order
                before |= set(zip(level_vars, level_vars[1:]))
        for name in outputs:
            if name in formats:
                inst = instances[output_instance[name]]
                level_vars = [inst.out_indices[d] for d in formats[name].mode_order]
                level_vars = [v for v in level_vars if isinstance(v, str)]
                before |= set(zip(level_vars, level_vars[1:]))
        # topological order of instances: producers before consumers
        ordered = _topological(instances)
        from ..ir.background import backgrounds

        variant = {"separate_reductions": separate_reductions, "buffered": set(buffered),
                   "share_covered": share_covered, "isolated": set(isolated)}
        return Region(program, list(group), list(outputs), ordered, leaves, order_seen, extent,
                      output_instance, before, dict(shapes), backgrounds(program), variant=variant)

    def instance(self, inst_id: int) -> Instance:
        return self._by_id[inst_id]

    def __post_init__(self):
        self._by_id = {inst.id: inst for inst in self.instances}


def buffer_candidates(region: Region) -> list[tuple[str, int]]:
    """Uses (consumer op's tensor, input) of an instance that another consumer also reads, or
    that the region writes: the uses `Region.build(buffered=...)` may read through a buffer,
    latest consumers first."""
    written = set(region.output_instance.values())
    topo = {inst.id: n for n, inst in enumerate(region.instances)}
    found = {}
    for inst in region.instances:
        readers = {c for c, _ in inst.consumers}
        if len(readers) + (inst.id in written) >= 2:
            for c, k in inst.consumers:
                use = (region.instance(c).tensor, k)
                found[use] = max(found.get(use, -1), topo[c])
    return sorted(found, key=lambda use: (-found[use], use[1]))


def _filtered_uses(inst: Instance, k: int, covered: dict | None = None, bg: dict | None = None) -> set[str]:
    """Variables at which consumer `inst` may change the coordinates of its operand k: drop some
    (an intersection with an operand that may lack coordinates; `covered`: the dimensions each
    tensor's stream always covers, see `coverage.covered_dims`, drop nothing) or pad it (a union
    with a part that may hold coordinates k lacks, unless k covers the variable)."""
    from .patterns import Intersect, Operand, Union, merge_at, operand_indices

    def drops(part, full) -> bool:  # a partner that may lack coordinates
        return not (isinstance(part, Operand) and full[part.index])

    def under_intersect(merge, full, inside=False) -> bool:
        if isinstance(merge, Operand):
            return inside and merge.index == k
        parts = getattr(merge, "parts", ())
        filtering = isinstance(merge, Intersect) and any(
            drops(p, full) for p in parts if not (isinstance(p, Operand) and p.index == k))
        return any(under_intersect(p, full, inside or filtering) for p in parts)

    def padded(merge) -> bool:
        parts = getattr(merge, "parts", ())
        if isinstance(merge, Union):
            mentions = [k in operand_indices(p) for p in parts]
            if any(mentions) and not all(mentions):
                return True
        return any(padded(p) for p in parts)

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
        if under_intersect(merge, full) or (not covers[k] and padded(merge)):
            found.add(v)
    return found


def _filtered_shared_uses(instances: list[Instance], covered: dict | None = None,
                          bg: dict | None = None, written: set | frozenset = frozenset()) -> set:
    """Uses (consumer id, input) that filter an instance another consumer also reads, or that
    the region writes (ids in `written`); such a use gets its own copy of the producer, since
    the filtering would otherwise reach the other reader or what gets written.
    Filtering is transitive: a filtered consumer filters the operands it streams through."""
    by_id = {i.id: i for i in instances}
    filtered: dict[int, set[str]] = {}  # instance -> local-variable names of its op it may lose
    order = _topological(instances)
    for inst in reversed(order):  # consumers first
        lost = set()
        for c_id, k in inst.consumers:
            consumer = by_id[c_id]
            via = _filtered_uses(consumer, k, covered, bg) | filtered.get(c_id, set())
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
            via = _filtered_uses(consumer, k, covered, bg) | filtered.get(c_id, set())
            if set(consumer.op.inputs[k].indices) & via:
                unsafe.add((c_id, k))
    return unsafe


def _topological(instances: list[Instance]) -> list[Instance]:
    done: set[int] = set()
    out: list[Instance] = []
    by_id = {i.id: i for i in instances}

    def visit(inst: Instance):
        if inst.id in done:
            return
        done.add(inst.id)
        for kind, ref in inst.operands:
            if kind == "inst":
                visit(by_id[ref])
        out.append(inst)

    for inst in sorted(instances, key=lambda i: i.id):
        visit(inst)
    return out
