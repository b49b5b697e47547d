"""Structured ops whose indexing maps MLIR leaves implicit, and `tensor.concat` in index notation.

Named elementwise ops (`linalg.add`, `linalg.exp`, ...), `linalg.map` and `linalg.copy` index
every operand with the identity; `linalg.reduce` drops its `dimensions` from the output.
`tensor.concat` becomes one product per source with a constant 0/1 placement matrix (stored
CSR, one entry per row that the source fills), then the sum of those products: a gather that
fuses like any other op.

    >>> from fuseflow.ir.program import Program, Tensor
    >>> p = Program("cat")
    >>> p.add_tensor(Tensor("a", (2, 3)), role="input"); p.add_tensor(Tensor("b", (1, 3)), role="input")
    >>> p.add_tensor(Tensor("c", (3, 3)))
    >>> parts = add_concat(p, "c", ["a", "b"], 0, "here", lambda n: n)
    >>> [str(op) for op in p.ops]
    ['c_part0(i,j) = sum[k] c_place0(i,k) * a(k,j)', 'c_part1(i,j) = sum[k] c_place1(i,k) * b(k,j)', \
'c(i,j) = c_part0(i,j) + c_part1(i,j)']
    >>> parts, p.constants["c_place1"].tolist()
    (['c_part0', 'c_part1'], [[0.0], [0.0], [1.0]])
"""
from __future__ import annotations

import numpy as np

from ..errors import NotSupported
from ..ir.expr import Binary, In
from ..ir.formats import TensorFormat
from ..ir.program import Access, IndexOp, Program, Tensor

VAR_NAMES = "ijklmnpqrstuvw"
ELEMENTWISE = {"add", "sub", "mul", "div", "div_unsigned", "max", "min", "powf", "exp", "log", "abs", "ceil",
               "floor", "negf", "reciprocal", "round", "sqrt", "rsqrt", "square", "tanh", "erf", "map", "copy",
               "select"}
PLACEMENT = TensorFormat.parse("dense,compressed")


def implicit_maps(op, ir) -> list | None:
    """Identity maps for a named elementwise op, `linalg.map` or `linalg.copy` whose operands
    share one rank; for `linalg.reduce`, identity inputs and an output without the reduced
    dimensions; None for any other op."""
    kind = op.name.removeprefix("linalg.")
    ranks = [len(ir.RankedTensorType(v.type).shape) for v in op.operands
             if isinstance(v.type, ir.RankedTensorType)]
    if len(ranks) != len(op.operands) or not ranks:
        return None
    if kind in ELEMENTWISE and len(set(ranks)) == 1:
        return [ir.AffineMap.get_identity(ranks[0]) for _ in ranks]
    if kind == "reduce" and "dimensions" in op.attributes:
        reduced = set(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        rank = ranks[0]
        kept = [ir.AffineDimExpr.get(d) for d in range(rank) if d not in reduced]
        n_out = len(op.results)
        return [ir.AffineMap.get_identity(rank)] * (len(ranks) - n_out) + [ir.AffineMap.get(rank, 0, kept)] * n_out
    return None


def add_concat(program: Program, name: str, sources: list[str], dim: int, where: str, fresh) -> list[str]:
    """Ops computing `name`, already declared, as the concatenation of `sources` along `dim`:
    `name_partK = sum[k] name_placeK(i_dim, k) * sourceK(.., k, ..)`, then their sum. The
    placement matrices are constant inputs. Returns the parts' names (`fresh` makes names unique)."""
    out = program.tensors[name]
    sizes = [program.tensors[s].shape[dim] for s in sources]
    if None in sizes or None in out.shape:
        raise NotSupported("tensor.concat of tensors with dynamic sizes", where, "give the sizes in the types")
    out_vars = tuple(VAR_NAMES[:out.rank])
    inner = VAR_NAMES[out.rank]
    parts, offset = [], 0
    for k, (source, size) in enumerate(zip(sources, sizes)):
        place = fresh(f"{name}_place{k}")
        matrix = np.zeros((out.shape[dim], size))
        matrix[offset + np.arange(size), np.arange(size)] = 1.0
        offset += size
        program.add_tensor(Tensor(place, matrix.shape, out.dtype, PLACEMENT), role="input")
        program.constants[place] = matrix
        part = fresh(f"{name}_part{k}")
        program.add_tensor(Tensor(part, out.shape, out.dtype))
        src_vars = out_vars[:dim] + (inner,) + out_vars[dim + 1:]
        operands = (Access(place, (out_vars[dim], inner)), Access(source, src_vars))
        program.add_op(IndexOp(Access(part, out_vars), operands, Binary("mul", In(0), In(1)), (inner,), "sum",
                               loc=where))
        parts.append(part)
    body = In(0)
    for k in range(1, len(parts)):
        body = Binary("add", body, In(k))
    program.add_op(IndexOp(Access(name, out_vars), tuple(Access(p, out_vars) for p in parts), body, loc=where))
    return parts
