"""Constant folding: values the program fixes without reading any data are computed once here, so
no fused graph streams a constant or an identically zero value.

A tensor is constant when the op writing it reads no tensor (`linalg.fill`) or only constant ones.
Each op reading a constant tensor takes its value into its body; subexpressions of constants are
evaluated (`x / (8 * 16 * 16)` divides by 2048), a product with zero is zero (as an implicit
zero of a sparse operand is: no coordinate is visited), and `x * 1`, `x / 1`, `x + 0`, `x - 0`
become `x`. An op whose body is then a constant is itself constant (a reduction of a constant
`c` over `n` coordinates is `n * c` for a sum, `c` for max and min), and an op left reading
nothing along a reduced variable sums (`n *`) or takes (max, min) its body along it. Ops
whose results no output needs any more are dropped. An output that is itself a constant (of a
known shape) becomes a copy of a new input holding that value everywhere, stored in the output's
format, so a compressed zero stores nothing and its streams are empty.

    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir('''
    ... func.func @f(%x: tensor<4xf32>, %w: tensor<3x4xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
    ...   %z = arith.constant 0.0 : f32
    ...   %e = tensor.empty() : tensor<3x4xf32>
    ...   %zw = linalg.fill ins(%z : f32) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
    ...   %o = tensor.empty() : tensor<3xf32>
    ...   %f = linalg.fill ins(%z : f32) outs(%o : tensor<3xf32>) -> tensor<3xf32>
    ...   %y = linalg.matvec ins(%zw, %x : tensor<3x4xf32>, tensor<4xf32>) outs(%f : tensor<3xf32>) -> tensor<3xf32>
    ...   %r = linalg.add ins(%y, %b : tensor<3xf32>, tensor<3xf32>) outs(%o : tensor<3xf32>) -> tensor<3xf32>
    ...   return %r : tensor<3xf32>
    ... }''')
    >>> [str(op) for op in p.ops]
    ['zw(i,j) = 0', 'y(i) = sum[j] zw(i,j) * x(j)', 'r(i) = y(i) + b(i)']
    >>> [str(op) for op in fold_constants(p).ops]
    ['r(i) = b(i)']
"""
from __future__ import annotations

import copy
import math

import numpy as np

from ..scalar_ops import is_identity
from .expr import Binary, Const, Expr, In, Select, map_inputs, renumber_inputs, with_children
from .program import Access, IndexOp, Program, ReshapeOp, Tensor, op_output
from .verify import infer_shapes, verify

IDENTITIES = {("mul", 1.0), ("div", 1.0), ("add", 0.0), ("sub", 0.0)}  # (op, c): x op c == x


def fold_constants(program: Program, shapes: dict | None = None) -> Program:
    """The program with constant tensors folded into the ops reading them (see the module);
    `program` itself when nothing folds. `shapes`: every tensor's shape (`infer_shapes`), for
    the extents of the reductions a constant takes its variables from."""
    shapes = shapes or infer_shapes(program, {}, allow_dynamic=True)
    constant: dict[str, float] = {}
    ops, changed = [], False
    for op in program.ops:
        if isinstance(op, ReshapeOp):  # a reshaped constant stays a tensor (its op is kept)
            ops.append(op)
            continue
        folded = _fold_op(op, constant, shapes)
        changed = changed or folded != op
        if not folded.inputs and isinstance(folded.body, Const) and not folded.reduce_vars \
                and _written_everywhere(folded.output, shapes[op_output(folded)]):
            constant[op_output(folded)] = folded.body.value
        ops.append(folded)
    stored = [k for k, op in enumerate(ops) if op_output(op) in program.outputs and op_output(op) in constant
              and None not in shapes[op_output(op)]]
    if not changed and not stored:
        return program
    result = copy.deepcopy(program)
    for k in stored:
        ops[k] = _read_from_constant_input(result, ops[k], shapes[op_output(ops[k])])
    result.ops = _needed(ops, result.outputs)
    for name in set(result.tensors) - set(result.inputs) - {op_output(op) for op in result.ops}:
        del result.tensors[name]
    verify(result)
    return result


def fold_expression(e: Expr) -> Expr:
    """`e` with its constant subexpressions evaluated (in float64, as the reference computes),
    products with zero made zero and identities (`x * 1`, `x + 0`, ...) dropped.

        >>> print(fold_expression(Binary("div", In(0), Binary("mul", Const(8.0), Const(256.0)))).to_text(["x"]))
        x / 2048
        >>> fold_expression(Binary("add", Binary("mul", Const(0.0), In(0)), In(1)))
        In(index=1)
    """
    e = with_children(e, tuple(fold_expression(c) for c in e.children()))
    kids = e.children()
    if isinstance(e, Select):
        if isinstance(e.cond, Const):
            return e.if_true if e.cond.value else e.if_false
        if e.if_true == e.if_false:
            return e.if_true
    if kids and all(isinstance(k, Const) for k in kids):
        return Const(float(np.asarray(e.evaluate([], np.float64))))
    if isinstance(e, Binary):
        if e.op == "mul" and Const(0.0) in kids:
            return Const(0.0)
        if isinstance(e.rhs, Const) and (e.op, e.rhs.value) in IDENTITIES:
            return e.lhs
        if isinstance(e.lhs, Const) and e.op in ("mul", "add") and (e.op, e.lhs.value) in IDENTITIES:
            return e.rhs
    return e


def _fold_op(op: IndexOp, constant: dict, shapes: dict) -> IndexOp:
    """`op` with the constant tensors it reads taken into its body, its body folded, and its
    reductions along variables no input indexes any more applied to the body."""
    if not any(a.tensor in constant for a in op.inputs) and fold_expression(op.body) == op.body:
        return op
    body = map_inputs(op.body, lambda leaf: Const(constant[op.inputs[leaf.index].tensor])
                      if op.inputs[leaf.index].tensor in constant else leaf)
    body = fold_expression(body)
    used = sorted(body.inputs_used())
    inputs = tuple(op.inputs[k] for k in used)
    body = renumber_inputs(body, {k: n for n, k in enumerate(used)})
    indexed = {v for a in inputs for v in a.vars}
    stranded = [v for v in op.reduce_vars if v not in indexed]
    extent = {v: d for a in op.inputs for v, d in zip(a.indices, shapes[a.tensor]) if isinstance(v, str)}
    if stranded and (any(extent.get(v) is None for v in stranded) or not is_identity(op.init, op.reduce_kind)):
        return op  # a dynamic extent, or a start to keep: the constant stays a tensor this op reads
    if stranded and op.reduce_kind == "sum":
        body = fold_expression(Binary("mul", body, Const(float(math.prod(extent[v] for v in stranded)))))
    reduce_vars = tuple(v for v in op.reduce_vars if v not in stranded)
    reduced = bool(reduce_vars)
    return IndexOp(op.output, inputs, body, reduce_vars, op.reduce_kind if reduced else None,
                   op.init if reduced else None, op.loc)


def _read_from_constant_input(program: Program, op: IndexOp, shape: tuple) -> IndexOp:
    """A constant output `t = c` as a copy of a new input of `program` holding `c` everywhere,
    stored in the output's format (a compressed zero stores nothing: its streams are empty)."""
    out = op.output.tensor
    name, k = f"{out}_value", 1
    while name in program.tensors:
        name, k = f"{out}_value{k}", k + 1
    declared = program.tensors[out]
    program.add_tensor(Tensor(name, shape, declared.dtype, declared.format), role="input")
    program.constants[name] = np.full(shape, op.body.value)
    return IndexOp(op.output, (Access(name, op.output.indices),), In(0), loc=op.loc)


def _written_everywhere(out, shape: tuple) -> bool:
    """Whether an op writing `out` writes every entry (not a diagonal `t(i,i)` or a slice `t(i,0)`
    of a wider dimension)."""
    return len(set(out.vars)) == len(out.vars) and all(isinstance(x, str) or d == 1 for x, d in zip(out.indices, shape))


def _needed(ops: list, outputs: list[str]) -> list:
    """The ops some output needs, in their order."""
    needed, kept = set(outputs), []
    for op in reversed(ops):
        if op_output(op) not in needed:
            continue
        kept.append(op)
        needed.update(op.tensors_read)
    return kept[::-1]

