"""Verifier and shape inference for Programs.

    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir('''
    ... func.func @f(%a: tensor<?x3xf32>, %x: tensor<3xf32>) -> tensor<?xf32> {
    ...   %c0 = arith.constant 0 : index
    ...   %n = tensor.dim %a, %c0 : tensor<?x3xf32>
    ...   %z = arith.constant 0.0 : f32
    ...   %e = tensor.empty(%n) : tensor<?xf32>
    ...   %f = linalg.fill ins(%z : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
    ...   %y = linalg.matvec ins(%a, %x : tensor<?x3xf32>, tensor<3xf32>) outs(%f : tensor<?xf32>) -> tensor<?xf32>
    ...   return %y : tensor<?xf32>
    ... }''')
    >>> infer_shapes(p, {"a": (5, 3)})["y"]
    (5,)
"""
from __future__ import annotations

from ..errors import UserError
from .expr import In
from .program import REDUCE_KINDS, IndexOp, Program, ReshapeOp, op_output


def verify(program: Program) -> None:
    """Check the structure of `program`: names defined once, ops in dependency order, accesses
    well formed (raises `UserError` naming the first problem)."""
    where = f"program {program.name}"
    defined = set(program.inputs)
    for name in program.inputs:
        if name not in program.tensors:
            raise UserError(f"input {name} has no tensor declaration", where)
    for op in program.ops:
        loc = op.loc or where
        out = op_output(op)
        if out not in program.tensors:
            raise UserError(f"op output {out} has no tensor declaration", loc)
        if out in defined:
            raise UserError(f"tensor {out} is defined twice", loc)
        for name in op.tensors_read:
            if name not in defined:
                raise UserError(f"op reads {name} before it is defined", loc)
        if isinstance(op, IndexOp):
            _verify_index_op(program, op, loc)
        else:
            _verify_reshape(program, op, loc)
        defined.add(out)
    for name in program.outputs:
        if name not in defined:
            raise UserError(f"program output {name} is never computed", where)
    infer_shapes(program, {}, allow_dynamic=True)


def _verify_index_op(program: Program, op: IndexOp, loc: str) -> None:
    for access in (op.output, *op.inputs):
        tensor = program.tensors[access.tensor]
        if len(access.indices) != tensor.rank:
            raise UserError(f"{access} indexes {tensor.rank}-d tensor {tensor.name} with "
                            f"{len(access.indices)} indices", loc)
        for pos, index in enumerate(access.indices):
            if isinstance(index, int) and (index != 0 or tensor.shape[pos] not in (1, None)):
                raise UserError(f"{access}: constant index {index} on a dimension of size "
                                f"{tensor.shape[pos]} (only 0 on unit dimensions)", loc)
    out_vars = op.output.vars
    if len(set(out_vars)) != len(out_vars):
        raise UserError(f"output {op.output} repeats an index variable", loc)
    if set(op.reduce_vars) & set(out_vars):
        raise UserError(f"reduction variables {op.reduce_vars} also index the output", loc)
    if op.reduce_vars and op.reduce_kind not in REDUCE_KINDS:
        raise UserError(f"unknown reduction kind {op.reduce_kind!r}", loc)
    used = {v for a in op.inputs for v in a.vars}
    out_tensor = program.tensors[op.output.tensor]
    for index, dim in zip(op.output.indices, out_tensor.shape):
        if isinstance(index, str) and index not in used and dim is None:  # a broadcast needs a size
            raise UserError(f"output variable {index} is indexed by no input and its size is dynamic", loc)
    if not set(op.reduce_vars) <= used:
        raise UserError(f"reduction variables {op.reduce_vars} are not indexed by any input", loc)
    bad = [i for i in op.body.inputs_used() if i >= len(op.inputs)]
    if bad:
        raise UserError(f"body refers to input {bad[0]} but the op has {len(op.inputs)}", loc)
    if not isinstance(op.body, In) and any(i not in op.body.inputs_used() for i in range(len(op.inputs))):
        pass  # an unused input is legal (linalg allows it); lowering ignores it


def _verify_reshape(program: Program, op: ReshapeOp, loc: str) -> None:
    src, dst = program.tensors[op.input], program.tensors[op.output]
    big, small = (dst, src) if dst.rank >= src.rank else (src, dst)
    flat = [d for group in op.reassociation for d in group]
    if flat != list(range(big.rank)) or len(op.reassociation) != small.rank:
        raise UserError(f"reshape groups {op.reassociation} do not map {src.rank}-d {src.name} "
                        f"to {dst.rank}-d {dst.name}", loc)
    for name in (op.input, op.output):
        if not program.tensors[name].format.is_dense:
            raise UserError(f"reshape of sparse tensor {name} is not supported", loc,
                            "store it dense or reshape before it becomes sparse")


def infer_shapes(program: Program, given: dict[str, tuple[int, ...]],
                 allow_dynamic: bool = False) -> dict[str, tuple]:
    """Shapes of every tensor, from declarations plus the shapes of `given` data.

    Raises UserError on a mismatch, or (unless allow_dynamic) on a dynamic
    dimension that no data determines.
    """
    shapes: dict[str, list] = {}
    for name in program.inputs:
        declared = list(program.tensors[name].shape)
        if name in given:
            actual = tuple(given[name])
            if len(actual) != len(declared) or any(d is not None and d != a for d, a in zip(declared, actual)):
                dims = ",".join("?" if d is None else str(d) for d in declared)
                raise UserError(f"data for input {name} has shape {actual}, declared [{dims}]",
                                f"program {program.name}", "pass data of the declared shape")
            declared = list(actual)
        shapes[name] = declared
    for op in program.ops:
        loc = op.loc or f"program {program.name}"
        out = op_output(op)
        declared = list(program.tensors[out].shape)
        if isinstance(op, IndexOp):
            extent: dict[str, int] = {}
            for access in op.inputs:
                for index, dim in zip(access.indices, shapes[access.tensor]):
                    if isinstance(index, str) and dim is not None:
                        if extent.setdefault(index, dim) != dim:
                            raise UserError(f"shape mismatch: index {index} of {access} has size {dim}, "
                                            f"elsewhere in the op {extent[index]}", loc)
            for index, dim in zip(op.output.indices, declared):
                if isinstance(index, str) and dim is not None:
                    if extent.setdefault(index, dim) != dim:
                        raise UserError(f"shape mismatch: output {op.output} has size {dim} at {index}, "
                                        f"inputs give {extent[index]}", loc)
            result = [1 if isinstance(i, int) else extent.get(i) for i in op.output.indices]
        else:
            src = shapes[op.input]
            result = declared
            if None not in src and None in declared:
                known = 1
                for d in declared:
                    known *= d or 1
                total = 1
                for d in src:
                    total *= d
                result = [total // known if d is None else d for d in declared]
        shapes[out] = result
        if isinstance(op, IndexOp) and isinstance(op.init, str):
            if shapes[op.init] != result and None not in shapes[op.init] and None not in result:
                raise UserError(f"init tensor {op.init} has shape {shapes[op.init]}, output {result}", loc)
    for name, shape in shapes.items():
        if None in shape and not allow_dynamic:
            raise UserError(f"dynamic dimension of {name} is not determined by the data",
                            f"program {program.name}", "supply data for the inputs with '?' dimensions")
    return {name: tuple(shape) for name, shape in shapes.items()}
