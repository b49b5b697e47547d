"""The records a fused region is made of: stored accesses (`Leaf`), op instances (`Instance`) and
the operand references between them (`LeafInput`, `ProducerInput`).

An instance reads each input either from memory (a leaf of the region) or from the values of
another instance of the region (its producer):

    >>> from fuseflow.ir.program import Access, IndexOp
    >>> from fuseflow.ir.expr import Binary, In
    >>> op = IndexOp(Access("T", ("i", "k")), (Access("A", ("i", "l")), Access("B", ("l", "k"))),
    ...              Binary("mul", In(0), In(1)), ("l",), "sum")
    >>> inst = Instance(0, op, operands=[LeafInput(0), ProducerInput(3)])
    >>> inst.bind_vars({"i": "i", "k": "j", "l": "l"})
    >>> str(inst), inst.local_vars, inst.reduce_vars, inst.leaf_ids(), inst.producer_ids()
    ('T(i,j) = sum[l] A(i,l) * B(l,j)', ['i', 'j', 'l'], ['l'], [0], [3])
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.formats import TensorFormat
from ..ir.program import Access, IndexOp


@dataclass(frozen=True)
class LeafInput:
    """An operand read from memory: leaf `leaf` of the region."""

    leaf: int


@dataclass(frozen=True)
class ProducerInput:
    """An operand computed in the region: the values of instance `producer`."""

    producer: int


@dataclass
class Leaf:
    """One access of a tensor that the region reads from memory. Its `format` is the declared
    one (`declared`) with the levels of the dimensions it indexes with the constant 0 (unit
    dimensions) dense (`TensorFormat.constant_levels_dense`): those levels are never scanned."""

    id: int
    tensor: str
    indices: tuple  # logical variable names, or 0 for a constant index
    format: TensorFormat
    shape: tuple
    free: bool = False  # layout follows the dataflow order (data is laid out to match it)
    storage: str = ""  # name of the stored copy the graph reads (tensor, tensor@order, tensor[cd])
    declared: TensorFormat | None = None  # the format before unit levels were made dense

    def __post_init__(self):
        self.declared = self.declared or self.format
        self._settle(self.declared.mode_order, self.tensor)

    def _settle(self, mode_order: tuple, name: str) -> None:
        """Levels of `declared` in `mode_order`, unit levels dense, and the stored copy's name."""
        fmt = TensorFormat(self.declared.levels, tuple(mode_order), self.declared.block)
        self.format = fmt.constant_levels_dense({d for d, i in enumerate(self.indices) if not isinstance(i, str)})
        self.storage = name
        if self.format.levels != fmt.levels:
            self.storage += "[" + "".join("c" if lv.is_compressed else "d" for lv in self.format.levels) + "]"

    def induce(self, pos: dict[str, int]) -> None:
        """Store the levels in the order the dataflow order visits the dimensions."""
        dims = sorted(range(len(self.indices)),
                      key=lambda d: (pos[self.indices[d]] if isinstance(self.indices[d], str) else len(pos), d))
        natural = tuple(range(len(dims)))
        name = self.tensor if tuple(dims) == natural else f"{self.tensor}@{','.join(map(str, dims))}"
        self._settle(tuple(dims), name)

    def level_vars(self) -> list:
        """Variables (or 0) of the stored levels, outermost first."""
        return [self.indices[d] for d in self.format.mode_order]

    def __str__(self) -> str:
        return f"{self.tensor}({','.join(str(i) for i in self.indices)})"


@dataclass
class Instance:
    """One use of an op in a region, its variables renamed to the region's (`bind_vars`)."""

    id: int
    op: IndexOp
    operands: list = field(default_factory=list)  # per input: a LeafInput or a ProducerInput
    consumers: list = field(default_factory=list)  # (instance id, input index)
    # per buffered input: producer variable -> this instance's variable for the same dimension
    # (the producer's finished values are read again in a later loop, see `Region.build`)
    rename: dict = field(default_factory=dict)
    var_of: dict[str, str] = field(default_factory=dict, init=False)  # op-local variable -> region variable
    local_vars: list[str] = field(default_factory=list, init=False)  # region variables, in op order
    reduce_vars: list[str] = field(default_factory=list, init=False)

    def bind_vars(self, var_of: dict[str, str]) -> None:
        """Name the op's variables in the region (`var_of`: op-local name -> region name)."""
        self.var_of = var_of
        self.local_vars = [var_of[v] for v in self.op.vars]
        self.reduce_vars = [var_of[v] for v in self.op.reduce_vars]

    @property
    def tensor(self) -> str:
        return self.op.output.tensor

    @property
    def out_indices(self) -> tuple:
        return tuple(self.var_of[i] if isinstance(i, str) else i for i in self.op.output.indices)

    def access(self, k: int) -> tuple:
        return tuple(self.var_of[i] if isinstance(i, str) else i for i in self.op.inputs[k].indices)

    def leaf_ids(self) -> list[int]:
        """The leaves this instance reads, in operand order."""
        return [x.leaf for x in self.operands if isinstance(x, LeafInput)]

    def producer_ids(self) -> list[int]:
        """The instances whose values this instance reads, in operand order."""
        return [x.producer for x in self.operands if isinstance(x, ProducerInput)]

    def __str__(self) -> str:
        renamed = IndexOp(Access(self.tensor, self.out_indices),
                          tuple(Access(a.tensor, self.access(k)) for k, a in enumerate(self.op.inputs)),
                          self.op.body, tuple(self.reduce_vars), self.op.reduce_kind, self.op.init)
        return str(renamed)


def topological(instances: list[Instance]) -> list[Instance]:
    """The instances with producers before consumers (depth first, in id order)."""
    done: set[int] = set()
    out: list[Instance] = []
    by_id = {i.id: i for i in instances}

    def visit(inst: Instance):
        if inst.id in done:
            return
        done.add(inst.id)
        for ref in inst.producer_ids():
            visit(by_id[ref])
        out.append(inst)

    for inst in sorted(instances, key=lambda i: i.id):
        visit(inst)
    return out
