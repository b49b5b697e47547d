"""Which dimensions of a tensor a fused stream always covers: every coordinate, whatever the data.

A stored tensor covers the dimensions of its dense levels. An op covers an output dimension
when its merge there (`patterns.merge_at`) is the universe, a union with a covering part, or
an intersection of covering parts, and every reduction variable's merge covers too (an
accumulator over an empty fiber emits nothing). A consumer that joins covering streams drops
and pads nothing, so the region may share their producers between consumers and written outputs.

A is DCSR, B dense and C CSR in `(A·B)·C`: T = A·B covers nothing (A's rows and columns are
compressed), so neither does O:

    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir("tests/mlir/matmul_chain.mlir")
    >>> covered_dims(p, {"T", "O"}, {})
    {'A': frozenset(), 'B': frozenset({0, 1}), 'T': frozenset(), 'C': frozenset({0}), 'O': frozenset()}
"""
from __future__ import annotations

import functools

from ..ir.program import IndexOp, Program, op_output, ops_by_output, remembered
from .patterns import Intersect, Operand, Union, Universe, merge_at, skip_value


@functools.lru_cache(maxsize=4096)  # a region build asks for every access of the program
def stored_dims(fmt, free: bool = False, indices=()) -> frozenset:
    """Dimensions stored in dense levels: every coordinate is present. A `free` tensor (laid out
    in whatever mode order the dataflow order needs) covers a dimension only if every level is
    dense, since its dense levels may land on other dimensions. The levels are those a region
    reads through an access with `indices` (`TensorFormat.constant_levels_dense`)."""
    fmt = fmt.constant_levels_dense({d for d, i in enumerate(indices) if not isinstance(i, str)})
    if free:
        return frozenset(fmt.mode_order) if fmt.is_dense else frozenset()
    return frozenset(d for d, level in zip(fmt.mode_order, fmt.levels) if not level.is_compressed)


def _covers(merge, full: list[bool]) -> bool:
    if isinstance(merge, Universe):
        return True
    if isinstance(merge, Operand):
        return full[merge.index]
    if isinstance(merge, Union):
        return any(_covers(p, full) for p in merge.parts)
    if isinstance(merge, Intersect):
        return all(_covers(p, full) for p in merge.parts)
    return False


def operand_covers(op: IndexOp, covered: dict, v: str) -> list[bool]:
    """Per operand of `op`: whether its stream holds every coordinate of variable `v`."""
    flags = []
    for access in op.inputs:
        dims = [d for d, index in enumerate(access.indices) if index == v]
        flags.append(bool(dims) and all(d in covered.get(access.tensor, ()) for d in dims))
    return flags


def _op_covers(op: IndexOp, v: str, covered: dict, bg: dict) -> bool:
    """Whether op's merge at `v`, over operands covering what `covered` says, covers every coordinate."""
    backgrounds = [bg.get(a.tensor, 0.0) for a in op.inputs]
    indexes = [v in a.indices for a in op.inputs]
    full = operand_covers(op, covered, v)
    skip = skip_value(op, bg.get(op_output(op), 0.0), v in op.reduce_vars)
    return _covers(merge_at(op.body, indexes, backgrounds, skip, full=full), full)


def covered_dims(program: Program, members: set, formats: dict, bg: dict | None = None,
                 free: set | frozenset = frozenset()) -> dict[str, frozenset]:
    """Per tensor the region reads or computes: the dimensions its stream always covers
    (`free`: stored tensors whose layout follows the dataflow order). A stored tensor's are read
    off its first access in the program."""
    bg = bg or {}
    first_reads = remembered(program, "first reads", _first_reads)
    position = remembered(program, "op positions", lambda p: {op_output(op): k for k, op in enumerate(p.ops)})
    ops = ops_by_output(program)
    covered: dict[str, frozenset] = {}
    for name in sorted((n for n in members if isinstance(ops[n], IndexOp)), key=position.__getitem__):
        op = ops[name]
        for access in op.inputs:
            if access.tensor not in members and access.tensor not in covered:
                fmt = formats.get(access.tensor, program.tensors[access.tensor].format)
                covered[access.tensor] = stored_dims(fmt, access.tensor in free, first_reads[access.tensor])
        if not all(_op_covers(op, r, covered, bg) for r in op.reduce_vars):
            covered[name] = frozenset(d for d, index in enumerate(op.output.indices) if not isinstance(index, str))
            continue
        covered[name] = frozenset(d for d, index in enumerate(op.output.indices)
                                  if not isinstance(index, str) or _op_covers(op, index, covered, bg))
    return covered


def _first_reads(program: Program) -> dict[str, tuple]:
    """Per tensor an index op reads, the indices of its first access in the program."""
    found: dict[str, tuple] = {}
    for op in program.ops:
        if isinstance(op, IndexOp):
            for access in op.inputs:
                found.setdefault(access.tensor, access.indices)
    return found
