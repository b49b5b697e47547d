"""Program-to-program cleanups run before fusion, and `prepare`, the canonical form they give.

`inline_copies` removes pure data-movement ops (transposes, broadcasts, unit-dimension
reshapes: `T(j,i) = W(i,j)`) by rewriting each consumer's access, so `t6 = sum[k] t2(i,k)*T(k,j)`
reads `W(j,k)` directly, as a dataflow graph reads a weight in whatever order it is stored.

    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir('''
    ... func.func @f(%x: tensor<2x3xf32>, %w: tensor<4x3xf32>) -> tensor<2x4xf32> {
    ...   %z = arith.constant 0.0 : f32
    ...   %e = tensor.empty() : tensor<3x4xf32>
    ...   %t = linalg.transpose ins(%w : tensor<4x3xf32>) outs(%e : tensor<3x4xf32>) permutation = [1, 0]
    ...   %o = tensor.empty() : tensor<2x4xf32>
    ...   %f = linalg.fill ins(%z : f32) outs(%o : tensor<2x4xf32>) -> tensor<2x4xf32>
    ...   %y = linalg.matmul ins(%x, %t : tensor<2x3xf32>, tensor<3x4xf32>)
    ...                      outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
    ...   return %y : tensor<2x4xf32>
    ... }''')
    >>> print(inline_copies(p).ops[0])
    y(i,j) = sum[k] x(i,k) * w(j,k)
"""
from __future__ import annotations

import copy

from ..scalar_ops import REDUCTIONS, is_identity
from .expr import Binary, Const, In
from .fold import fold_constants
from .program import Access, IndexOp, Program, Tensor, op_output
from .verify import infer_shapes, verify


def prepare(program: Program, shapes: dict | None = None) -> Program:
    """The canonical form that schedules name ops in: reductions start from their identity
    (`split_starts`), constants are folded into the ops reading them (`fold.fold_constants`),
    unit-extent variables become constant indices, then copies (transposes, broadcasts, unit
    reshapes) are inlined."""
    program = split_starts(program)
    program = fold_constants(program, infer_shapes(program, shapes or {}, allow_dynamic=True))
    return inline_copies(drop_unit_variables(program, infer_shapes(program, shapes or {}, allow_dynamic=True)))


def split_starts(program: Program) -> Program:
    """A reduction that starts from a tensor or a constant other than its identity
    (`Y = C + sum[k] A(i,k)*B(k,j)`, a matmul accumulating into an argument) becomes the
    reduction from the identity, `Y_r`, and an elementwise op folding the start in:
    `Y(i,j) = C(i,j) + Y_r(i,j)` (max and min alike). `Y` keeps its name.

        >>> from fuseflow.ir.expr import Binary, In
        >>> p = Program("acc")
        >>> for name, shape in (("A", (2, 3)), ("B", (3, 4)), ("C", (2, 4))):
        ...     p.add_tensor(Tensor(name, shape), role="input")
        >>> p.add_tensor(Tensor("Y", (2, 4)))
        >>> p.add_op(IndexOp(Access("Y", ("i", "j")), (Access("A", ("i", "k")), Access("B", ("k", "j"))),
        ...                  Binary("mul", In(0), In(1)), ("k",), "sum", "C"))
        >>> p.outputs.append("Y")
        >>> [str(op) for op in split_starts(p).ops]
        ['Y_r(i,j) = sum[k] A(i,k) * B(k,j)', 'Y(i,j) = C(i,j) + Y_r(i,j)']
    """
    if not any(isinstance(op, IndexOp) and op.reduce_vars and not is_identity(op.init, op.reduce_kind)
               for op in program.ops):
        return program
    result = copy.deepcopy(program)
    ops = []
    for op in result.ops:
        if not (isinstance(op, IndexOp) and op.reduce_vars and not is_identity(op.init, op.reduce_kind)):
            ops.append(op)
            continue
        out = op.output.tensor
        name = _fresh(result, out + "_r")
        declared = result.tensors[out]
        result.add_tensor(Tensor(name, declared.shape, declared.dtype))
        ops.append(IndexOp(Access(name, op.output.indices), op.inputs, op.body, op.reduce_vars, op.reduce_kind,
                           None, op.loc))
        partial = Access(name, op.output.indices)
        fold = REDUCTIONS[op.reduce_kind].op  # how the reduction folds in its starting value
        if isinstance(op.init, str):
            start, body = (Access(op.init, op.output.indices), partial), Binary(fold, In(0), In(1))
        else:
            start, body = (partial,), Binary(fold, Const(float(op.init)), In(0))
        ops.append(IndexOp(op.output, start, body, loc=op.loc))
    result.ops = ops
    verify(result)
    return result


def _fresh(program: Program, wanted: str) -> str:
    name, k = wanted, 1
    while name in program.tensors:
        name, k = f"{wanted}{k}", k + 1
    return name


def _is_copy(op) -> bool:
    return (isinstance(op, IndexOp) and op.body == In(0) and len(op.inputs) == 1 and not op.reduce_vars
            and op.init is None and len(set(op.output.vars)) == len(op.output.vars))


def _compose(copy_op: IndexOp, use: Access) -> Access:
    """The copy's source access seen through the consumer's access of the copy's output."""
    binding = {}
    for out_index, use_index in zip(copy_op.output.indices, use.indices):
        if isinstance(out_index, str):
            binding[out_index] = use_index
    src = copy_op.inputs[0]
    return Access(src.tensor, tuple(binding[i] if isinstance(i, str) else i for i in src.indices))


def inline_copies(program: Program) -> Program:
    """A new Program without copy ops whose outputs are read only by other ops. A copy that
    broadcasts along a variable its reader reduces stays (`max[i] b(i,j)` over `b(i,j) = a(0,j)`:
    inlined, no input would index `i`)."""
    result = copy.deepcopy(program)
    pinned = set(result.outputs)  # outputs, init tensors and reshape sources stay materialized
    for op in result.ops:
        if isinstance(op, IndexOp) and isinstance(op.init, str):
            pinned.add(op.init)
        elif not isinstance(op, IndexOp):
            pinned.add(op.input)
    while True:
        copies = {op_output(op): op for op in result.ops if _is_copy(op) and op_output(op) not in pinned}
        stuck = _broadcast_into_reduction(result, copies)
        if not stuck:
            break
        pinned |= stuck
    if not copies:
        return result
    ops = []
    for op in result.ops:
        if op_output(op) in copies:
            continue
        if isinstance(op, IndexOp):
            op = IndexOp(op.output, tuple(_resolve(a, copies) for a in op.inputs), op.body, op.reduce_vars,
                         op.reduce_kind, op.init, op.loc)
        ops.append(op)
    result.ops = ops
    for name in copies:
        del result.tensors[name]
    verify(result)
    return result


def _resolve(access: Access, copies: dict) -> Access:
    """The stored access behind chains of inlined copies."""
    while access.tensor in copies:
        access = _compose(copies[access.tensor], access)
    return access


def _broadcast_into_reduction(program: Program, copies: dict) -> set[str]:
    """Copies read by an op that, inlined, would leave one of its reduction variables indexed by
    no input."""
    stuck = set()
    for op in program.ops:
        if not isinstance(op, IndexOp) or not op.reduce_vars:
            continue
        resolved = [_resolve(a, copies) for a in op.inputs]
        if not set(op.reduce_vars) <= {v for a in resolved for v in a.vars}:
            stuck |= {a.tensor for a in op.inputs if a.tensor in copies}
    return stuck


def _constant_at(access: Access, unit: set) -> Access:
    """The access with the variables in `unit` replaced by the constant index 0."""
    return Access(access.tensor, tuple(0 if i in unit else i for i in access.indices))


def drop_unit_variables(program: Program, shapes: dict | None = None) -> Program:
    """Replace index variables of extent 1 by the constant index 0 (`t(i,l) = u(i,l)/6` over a
    5x1 tensor becomes `t(i,0) = u(i,0)/6`), so ops agree on which dimensions they iterate."""
    shapes = shapes or infer_shapes(program, {}, allow_dynamic=True)
    result = copy.deepcopy(program)
    ops = []
    for op in result.ops:
        if not isinstance(op, IndexOp):
            ops.append(op)
            continue
        extent: dict[str, int | None] = {}
        for access in (op.output, *op.inputs):
            for index, dim in zip(access.indices, shapes[access.tensor]):
                if isinstance(index, str) and dim is not None:
                    extent[index] = dim
        unit = {v for v, d in extent.items() if d == 1}
        if op.reduce_vars and not is_identity(op.init, op.reduce_kind):
            unit -= set(op.reduce_vars)
        if unit:
            reduce_vars = tuple(v for v in op.reduce_vars if v not in unit)
            inputs = tuple(_constant_at(a, unit) for a in op.inputs)
            op = IndexOp(_constant_at(op.output, unit), inputs, op.body, reduce_vars,
                         op.reduce_kind if reduce_vars else None, op.init if reduce_vars else None, op.loc)
        ops.append(op)
    result.ops = ops
    verify(result)
    return result
