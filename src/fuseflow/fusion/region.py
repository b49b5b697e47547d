"""A fused region: the ops of one schedule group as op *instances* over shared index variables.

Index variables are unified across expressions (`binding`): a consumer's access `T(i,k)` of an
intermediate binds the producer's output variables to `i` and `k`. When binding would force two
different variables of one op to be equal (e.g. GraphSAGE's `h(i,f)` and `A(i,k)·h(k,f)` in one
group), the consumer gets its own copy of the producer: the intermediate is recomputed for that use.

    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir("tests/mlir/matmul_chain.mlir")
    >>> r = Region.build(p, [op.output.tensor for op in p.ops])
    >>> r.vars, [str(i) for i in r.instances]
    (['i', 'j', 'k', 'l'], ['T(i,k) = sum[l] A(i,l) * B(l,k)', 'O(i,j) = sum[k] T(i,k) * C(k,j)'])
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import NotSupported, UserError
from ..ir.background import backgrounds
from ..ir.formats import TensorFormat
from ..ir.program import IndexOp, Program, ops_by_output
from ..ir.program import readers as tensor_readers
from .binding import Binding, BindingOptions, PendingLeaf, filtered_shared_uses
from .coverage import covered_dims
from .index import RegionIndex
from .instances import Instance, Leaf, LeafInput, topological

# names given to variables whose op-local name another class of the region already took
SPARE_NAMES = "ijklmnpqrstuvwabcdefgh"


@dataclass(frozen=True)
class Variant:
    """How `Region.build` shared and copied producers (its options; see there)."""

    separate_reductions: bool = False
    buffered: frozenset = frozenset()
    share_covered: bool = True
    isolated: frozenset = frozenset()

    def options(self) -> dict:
        """The keyword arguments of `Region.build` that rebuild this variant."""
        return {"separate_reductions": self.separate_reductions, "buffered": set(self.buffered),
                "share_covered": self.share_covered, "isolated": set(self.isolated)}


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
    variant: Variant = field(default_factory=Variant)
    covered: dict = field(default_factory=dict)  # per tensor: dimensions its stream always covers (`coverage`)

    @staticmethod
    def build(program: Program, group: list[str], outputs: list[str] | None = None,
              formats: dict[str, TensorFormat] | None = None, shapes: dict | None = None,
              free: set[str] | frozenset = frozenset(), separate_reductions: bool = False,
              buffered: set | frozenset = frozenset(), share_covered: bool = True,
              isolated: set | frozenset = frozenset()) -> Region:
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
        variant = Variant(separate_reductions, frozenset(buffered), share_covered, frozenset(isolated))
        return _RegionBuilder(program, group, outputs, formats or {}, shapes, frozenset(free), variant).build()

    def instance(self, inst_id: int) -> Instance:
        return self._by_id[inst_id]

    def __post_init__(self):
        self._by_id = {inst.id: inst for inst in self.instances}
        self.index = RegionIndex(self)


class _RegionBuilder:
    """`Region.build` in named steps: check the group, bind its ops until no shared producer is
    filtered, name the variables, number the leaves, then the extents and order constraints."""

    def __init__(self, program: Program, group: list[str], outputs: list[str] | None, formats: dict,
                 shapes: dict | None, free: frozenset, variant: Variant):
        self.program = program
        self.group = group
        self.formats = formats
        self.shapes = shapes or {n: t.shape for n, t in program.tensors.items()}
        self.free = free
        self.variant = variant
        self.check_group()
        self.outputs = outputs if outputs is not None else self.default_outputs()
        self.background = backgrounds(program)

    def build(self) -> Region:
        binding = self.bind_until_safe()
        covered = binding.options.covered
        instances = binding.instances
        self.name_variables(binding)
        self.rename_buffered(binding)
        order_seen = list(dict.fromkeys(v for inst in instances for v in inst.local_vars))
        leaves = self.number_leaves(instances)
        extent = self.extents(instances, order_seen)
        before = self.constraints(leaves, instances, binding.output_instance)
        return Region(self.program, list(self.group), list(self.outputs), topological(instances), leaves,
                      order_seen, extent, binding.output_instance, before, dict(self.shapes), self.background,
                      variant=self.variant, covered=dict(covered))

    def check_group(self) -> None:
        ops = ops_by_output(self.program)
        for name in self.group:
            if name not in ops:
                raise UserError(f"{name} is not computed by an op of program {self.program.name}")
            if not isinstance(ops[name], IndexOp):
                raise NotSupported(f"fusing the reshape producing {name} (a reshape must be its own group)")

    def default_outputs(self) -> list[str]:
        """The group's tensors read outside the group or returned by the program."""
        members = set(self.group)
        readers = tensor_readers(self.program)
        return [n for n in self.group if any(r not in members for r in readers.get(n, ())) or n in self.program.outputs]

    def bind_until_safe(self) -> Binding:
        """Bind the ops; while some use filters a producer that another reader shares, give that
        use its own producer (and, if that makes no progress, every use of those producers)."""
        v = self.variant
        covered = covered_dims(self.program, set(self.group), self.formats, self.background, self.free)
        options = BindingOptions(v.separate_reductions, v.buffered, v.share_covered, v.isolated, covered)
        while True:
            binding = Binding(self.program, self.group, self.outputs, options)
            written = set(binding.output_instance.values())
            unsafe = filtered_shared_uses(binding.instances, covered, self.background, written)
            if not unsafe:
                return binding
            if unsafe <= options.no_share:  # no progress: copy those producers for every use
                by_id = {i.id: i for i in binding.instances}
                grown = options.private | {by_id[c].op.inputs[k].tensor for c, k in unsafe}
                if grown == options.private:
                    raise NotSupported("an intermediate read by several fused consumers that filter it "
                                       "differently", f"group {self.group}", "split the group")
                options.private = grown
            options.no_share |= unsafe

    @staticmethod
    def name_variables(binding: Binding) -> None:
        """Each class of unified variables takes the op-local name of the first instance that
        uses it (a spare letter if another class took that name)."""
        names: dict[str, str] = {}
        taken: set[str] = set()
        uf = binding.uf
        for inst in binding.instances:
            for v in inst.op.vars:
                root = uf.find(inst.var_of[v])
                if root not in names:
                    name = v
                    if name in taken:
                        unused = [c for c in SPARE_NAMES if c not in taken]
                        name = unused[0] if unused else f"{v}{len(taken)}"
                    names[root] = name
                    taken.add(name)
        for inst in binding.instances:
            inst.bind_vars({v: names[uf.find(x)] for v, x in inst.var_of.items()})

    @staticmethod
    def rename_buffered(binding: Binding) -> None:
        """A buffered use maps its producer's variables to its own where they differ."""
        for (inst_id, k), pairs in binding.links.items():
            inst = binding.instances[inst_id]
            producer = binding.instances[inst.operands[k].producer]
            rename = {producer.var_of[b]: inst.var_of[a] for a, b in pairs if producer.var_of[b] != inst.var_of[a]}
            if rename:
                inst.rename[k] = rename

    def number_leaves(self, instances: list[Instance]) -> list[Leaf]:
        """One leaf per access of a stored tensor, numbered in instance and operand order."""
        leaves: list[Leaf] = []
        for inst in instances:
            for k, operand in enumerate(inst.operands):
                if isinstance(operand, PendingLeaf):
                    name = operand.tensor
                    fmt = self.formats.get(name, self.program.tensors[name].format)
                    leaf = Leaf(len(leaves), name, inst.access(k), fmt, tuple(self.shapes[name]),
                                free=name in self.free)
                    leaves.append(leaf)
                    inst.operands[k] = LeafInput(leaf.id)
        return leaves

    def extents(self, instances: list[Instance], order_seen: list[str]) -> dict[str, int]:
        """Each variable's extent, from the first access whose shape knows it."""
        extent: dict[str, int] = {}
        for inst in instances:
            dims = [(inst.access(k), self.shapes[a.tensor]) for k, a in enumerate(inst.op.inputs)]
            dims.append((inst.out_indices, self.shapes[inst.tensor]))
            for idx, shape in dims:
                for v, d in zip(idx, shape):
                    if isinstance(v, str) and d is not None:
                        extent.setdefault(v, d)
        missing = [v for v in order_seen if v not in extent]
        if missing:
            raise UserError(f"the size of index variable {missing[0]} is unknown", f"group {self.group}",
                            "supply data for inputs with dynamic dimensions")
        return extent

    def constraints(self, leaves: list[Leaf], instances: list[Instance],
                    output_instance: dict[str, int]) -> set[tuple[str, str]]:
        """(a, b) pairs: a compressed stored level of a leaf (not free) or a level of an output
        with a given format must be visited after the level above it."""
        before: set[tuple[str, str]] = set()
        for leaf in leaves:
            level_vars = [v for v in leaf.level_vars() if isinstance(v, str)]
            if len(set(level_vars)) != len(level_vars):
                raise NotSupported(f"{leaf} indexes two of its levels with one variable (a diagonal)")
            if not leaf.free and not leaf.format.is_dense:  # dense: random access in any order
                before |= set(zip(level_vars, level_vars[1:]))
        for name in self.outputs:
            if name in self.formats:
                inst = instances[output_instance[name]]
                level_vars = [inst.out_indices[d] for d in self.formats[name].mode_order]
                level_vars = [v for v in level_vars if isinstance(v, str)]
                before |= set(zip(level_vars, level_vars[1:]))
        return before


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
