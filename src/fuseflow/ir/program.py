"""The tensor program: tensors with formats, and ops in index notation.

    >>> from fuseflow.ir.expr import In, Binary
    >>> p = Program("spmm")
    >>> p.add_tensor(Tensor("A", (4, 4), "f32", TensorFormat.parse("dense,compressed")), role="input")
    >>> p.add_tensor(Tensor("X", (4, 2)), role="input")
    >>> p.add_tensor(Tensor("T", (4, 2)))
    >>> p.add_op(IndexOp(Access("T", ("i", "j")), (Access("A", ("i", "k")), Access("X", ("k", "j"))),
    ...                  Binary("mul", In(0), In(1)), reduce_vars=("k",), reduce_kind="sum"))
    >>> p.outputs.append("T")
    >>> print(p.ops[0])
    T(i,j) = sum[k] A(i,k) * X(k,j)
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, fields

import numpy as np

from ..scalar_ops import is_identity
from .expr import Expr
from .expr import from_json as expr_from_json
from .formats import DENSE, LEVEL_FORMATS, TensorFormat

Index = str | int  # a variable name, or the constant index 0 of a unit dimension
REDUCE_KINDS = ("sum", "max", "min")


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int | None, ...]  # None = dynamic, resolved from data
    dtype: str = "f32"
    format: TensorFormat | None = None

    def __post_init__(self):
        if self.format is None:
            object.__setattr__(self, "format", TensorFormat.dense(len(self.shape)))

    @property
    def rank(self) -> int:
        return len(self.shape)

    def describe(self) -> str:
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {self.dtype}[{dims}] {{{self.format}}}"


@dataclass(frozen=True)
class Access:
    """One use of a tensor: `A(i,k)`; an int index is the constant 0 of a unit dim."""

    tensor: str
    indices: tuple[Index, ...]

    @property
    def vars(self) -> tuple[str, ...]:
        return tuple(i for i in self.indices if isinstance(i, str))

    def __str__(self) -> str:
        return f"{self.tensor}({','.join(str(i) for i in self.indices)})"


@dataclass(frozen=True)
class IndexOp:
    """`out(vars) = [init ⊕] reduce_kind[reduce_vars] body(inputs...)`.

    `init` is None (the reduction's identity), a float, or the name of a tensor
    with the output's shape whose values the reduction starts from.
    """

    output: Access
    inputs: tuple[Access, ...]
    body: Expr
    reduce_vars: tuple[str, ...] = ()
    reduce_kind: str | None = None
    init: float | str | None = None
    loc: str | None = None

    @property
    def vars(self) -> tuple[str, ...]:
        """All index variables: output vars in output order, then the reduction vars."""
        seen = list(self.output.vars)
        for access in self.inputs:
            for v in access.vars:
                if v not in seen and v not in self.reduce_vars:
                    seen.append(v)
        return tuple(seen) + tuple(v for v in self.reduce_vars if v not in seen)

    @property
    def tensors_read(self) -> tuple[str, ...]:
        names = tuple(a.tensor for a in self.inputs)
        return names + ((self.init,) if isinstance(self.init, str) else ())

    def __str__(self) -> str:
        rhs = self.body.to_text([str(a) for a in self.inputs])
        if self.reduce_vars:
            rhs = f"{self.reduce_kind}[{','.join(self.reduce_vars)}] {rhs}"
        if self.init is not None and not is_identity(self.init, self.reduce_kind):
            start = self.init if isinstance(self.init, str) else _fmt_const(self.init)
            rhs = f"{start} ⊕ {rhs}" if self.reduce_kind != "sum" else f"{start} + {rhs}"
        return f"{self.output} = {rhs}"


@dataclass(frozen=True)
class ReshapeOp:
    """A dense row-major reshape: `out = reshape(input)` grouping dims by `reassociation`."""

    output: str
    input: str
    reassociation: tuple[tuple[int, ...], ...]
    loc: str | None = None

    @property
    def tensors_read(self) -> tuple[str, ...]:
        return (self.input,)

    def __str__(self) -> str:
        groups = ",".join("[" + ",".join(map(str, g)) + "]" for g in self.reassociation)
        return f"{self.output} = reshape({self.input}, {groups})"


Op = IndexOp | ReshapeOp


def _fmt_const(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def op_output(op: Op) -> str:
    return op.output.tensor if isinstance(op, IndexOp) else op.output


def remembered(program: Program, what: str, compute):
    """`compute(program)`, kept on `program` while its ops and inputs stay the same: a compile
    asks for whole-program facts once per region it builds. The caller must not change it.

        >>> p = Program("p")
        >>> remembered(p, "inputs", lambda q: list(q.inputs))
        []
        >>> p.inputs.append("x")
        >>> remembered(p, "inputs", lambda q: list(q.inputs))
        ['x']
    """
    ops = tuple(program.ops)
    key = (tuple(map(id, ops)), tuple(program.inputs))  # the ops themselves, not equal ones
    kept = program.__dict__.setdefault("_remembered", {})
    found = kept.get(what)
    if found is None or found[1] != key:
        found = kept[what] = (ops, key, compute(program))  # `ops` kept alive: their ids stay theirs
    return found[2]


def ops_by_output(program: Program) -> dict[str, Op]:
    """Each op by the tensor it writes (`remembered`: do not change it)."""
    return remembered(program, "ops by output", lambda p: {op_output(op): op for op in p.ops})


def readers(program: Program) -> dict[str, list[str]]:
    """Per tensor, the outputs of the ops that read it (`remembered`: do not change it)."""
    def compute(p: Program) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for op in p.ops:
            for name in op.tensors_read:
                found.setdefault(name, []).append(op_output(op))
        return found
    return remembered(program, "readers", compute)


@dataclass
class Program:
    """A tensor program: named tensors (shape, dtype, storage format), the inputs and outputs,
    and ops in index notation in execution order (what `fuseflow.from_mlir` returns)."""

    name: str
    tensors: dict[str, Tensor] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    constants: dict = field(default_factory=dict)  # known data of some inputs (ndarray, or scipy sparse)

    def __deepcopy__(self, memo):
        """A copy whose constants share their data with this program's (nothing changes it in
        place; a weight may take gigabytes)."""
        result = copy.copy(self)
        result.__dict__.pop("_remembered", None)  # facts of this program's ops, not of the copies
        memo[id(self)] = result
        for f in fields(self):
            value = getattr(self, f.name)
            setattr(result, f.name, dict(value) if f.name == "constants" else copy.deepcopy(value, memo))
        return result

    def add_tensor(self, tensor: Tensor, role: str | None = None) -> None:
        assert tensor.name not in self.tensors, f"tensor {tensor.name} defined twice"
        self.tensors[tensor.name] = tensor
        if role == "input":
            self.inputs.append(tensor.name)

    def add_op(self, op: Op) -> None:
        self.ops.append(op)

    def producer(self, name: str) -> Op | None:
        for op in self.ops:
            if op_output(op) == name:
                return op
        return None

    def intermediates(self) -> list[str]:
        return [op_output(op) for op in self.ops if op_output(op) not in self.outputs]

    def __str__(self) -> str:
        lines = [f"program {self.name}"]
        for name in self.inputs:
            tag = "  (constant)" if name in self.constants else ""
            lines.append(f"  input  {self.tensors[name].describe()}{tag}")
        for op in self.ops:
            out = op_output(op)
            kind = "output" if out in self.outputs else "temp  "
            lines.append(f"  {kind} {self.tensors[out].describe()}")
        for op in self.ops:
            lines.append(f"  {op}")
        return "\n".join(lines)

    # -- JSON ------------------------------------------------------------------
    def to_json(self) -> dict:
        def tensor_json(t: Tensor):
            f = t.format
            return {"name": t.name, "shape": list(t.shape), "dtype": t.dtype,
                    "levels": [str(lv) for lv in f.levels], "mode_order": list(f.mode_order),
                    "block": list(f.block) if f.block else None}

        def op_json(op: Op):
            if isinstance(op, ReshapeOp):
                return {"kind": "reshape", "output": op.output, "input": op.input,
                        "reassociation": [list(g) for g in op.reassociation], "loc": op.loc,
                        "text": str(op)}
            init = op.init
            if isinstance(init, float) and not np.isfinite(init):
                init = str(init)
            return {"kind": "index", "output": _access_json(op.output),
                    "inputs": [_access_json(a) for a in op.inputs], "body": op.body.to_json(),
                    "reduce_vars": list(op.reduce_vars), "reduce_kind": op.reduce_kind,
                    "init": init, "loc": op.loc, "text": str(op)}

        return {"name": self.name, "inputs": self.inputs, "outputs": self.outputs,
                "constants": sorted(self.constants),
                "tensors": [tensor_json(t) for t in self.tensors.values()],
                "ops": [op_json(op) for op in self.ops]}

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    @staticmethod
    def from_json(data: dict) -> "Program":
        """Rebuild the structure (constant data is not part of the JSON form)."""
        p = Program(data["name"])
        for t in data["tensors"]:
            fmt = TensorFormat(tuple(LEVEL_FORMATS.get(lv, DENSE) for lv in t["levels"]),
                               tuple(t["mode_order"]), tuple(t["block"]) if t["block"] else None)
            p.add_tensor(Tensor(t["name"], tuple(t["shape"]), t["dtype"], fmt))
        p.inputs, p.outputs = list(data["inputs"]), list(data["outputs"])
        for o in data["ops"]:
            if o["kind"] == "reshape":
                p.add_op(ReshapeOp(o["output"], o["input"], tuple(tuple(g) for g in o["reassociation"]),
                                   o["loc"]))
            else:
                init = o["init"]
                init = float(init) if init in ("inf", "-inf") else init
                p.add_op(IndexOp(_access_from_json(o["output"]),
                                 tuple(_access_from_json(a) for a in o["inputs"]),
                                 expr_from_json(o["body"]), tuple(o["reduce_vars"]), o["reduce_kind"],
                                 init, o["loc"]))
        return p


def _access_json(a: Access):
    return {"tensor": a.tensor, "indices": list(a.indices)}


def _access_from_json(d) -> Access:
    return Access(d["tensor"], tuple(d["indices"]))
