"""A window of a kernel whose outer loop is a reduction, checked on its own.

Such a window writes partial sums: its outputs equal the kernel's ops applied to their inputs
cut to the window along the outer variable (the arrays that variable indexes keep only the
window's rows). `PartialSums` evaluates that with the reference (`ir.reference`) on the cut
inputs, scipy slices of the reference's values, and compares: no window's output has to wait
for the others (a sampled kernel never simulates them all) or be held once checked. An output
that the outer variable does index (a reordered one, `spmm_jik`'s Y by columns) is the cut
result placed back at the window's coordinates, its background elsewhere.

    >>> import fuseflow
    >>> from fuseflow.pipeline import prepared
    >>> from fuseflow.partition.windows import kernel_setup, reference_values, run_window_of
    >>> p = fuseflow.from_mlir("tests/mlir/sddmm.mlir")
    >>> data, compiled = prepared(p, "full", None, 2, 0.3)
    >>> values = reference_values(p, data)
    >>> kernel = compiled.kernels[0]
    >>> check = partial_sums(kernel, values)
    >>> run = run_window_of(kernel_setup(kernel, values), Window(((2, 5),)), None, "fast")
    >>> check.problem(kernel.index, run.outputs, run.window) is None
    True
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from ..ir.program import IndexOp, Program, op_output
from ..ir.reference import reference
from ..ir.values import is_sparse
from ..pipeline import compare
from ..sim.window import Window, outer_dims, outer_extent


@dataclass(frozen=True)
class Cut:
    """How the outer variable indexes an array: its dimension `dim`, `block` rows per coordinate."""

    dim: int
    block: int = 1


def rows_of(value, dim: int, rows: np.ndarray):
    """`value`'s rows (columns for `dim` 1) `rows`, sparse or dense as `value` is."""
    if is_sparse(value):
        return sp.csr_array(value)[rows] if dim == 0 else sp.csc_array(value)[:, rows]
    return np.take(value, rows, axis=dim)


def sliceable(value, dim: int):
    """`value` in the layout whose `dim` is cheap to slice (a sparse matrix compressed along it),
    converted once rather than at each window's cut (the MAG twin's A: 5.4 M entries)."""
    if not is_sparse(value):
        return value
    return sp.csr_array(value) if dim == 0 else sp.csc_array(value)


def window_rows(window: Window, extent: int, block: int = 1) -> np.ndarray:
    """The rows of an array that `window`'s coordinates (below `extent`) take, `block` per coordinate.

        >>> window_rows(Window(((1, 3), (5, 9))), 6, 2).tolist()
        [2, 3, 4, 5, 10, 11]
    """
    coords = np.concatenate([np.arange(lo, min(hi, extent)) for lo, hi in window.ranges] or [np.zeros(0, int)])
    return (coords[:, None] * block + np.arange(block)).ravel().astype(np.int64)


@dataclass
class PartialSums:
    """What checks any window of one reducing kernel (`partial_sums` builds it): its ops as a
    program whose outer-loop dimensions are left to the data, the reference's values of what
    they read, and where the outer variable indexes those and the kernel's outputs."""

    program: Program
    inputs: dict  # tensor -> the reference's value
    cuts: dict[str, Cut]  # input -> how the outer variable indexes it (absent: read whole)
    outputs: dict[str, tuple[str, Cut | None, float]]  # graph output not by rows -> (tensor, outer dim, background)
    extent: int
    rtol: float = 1e-6
    atol: float = 1e-9

    def expected(self, window: Window) -> dict:
        """The kernel's outputs on `window`, keyed by program tensor."""
        data = {n: rows_of(v, self.cuts[n].dim, window_rows(window, self.extent, self.cuts[n].block))
                if n in self.cuts else v for n, v in self.inputs.items()}
        values = reference(self.program, data)
        return {tensor: _placed(values[tensor], cut, fill, window, self.extent)
                for tensor, cut, fill in self.outputs.values()}

    def pattern_entries(self) -> int:
        """Values the kernel's partial-sum outputs hold over the whole loop when every value it
        reads is 1 where stored (a dense level stores all): the values a run of every window
        writes (`partition.drain`), no sum cancelling to 0."""
        data = {n: _pattern(v, self.program.tensors[n]) for n, v in self.inputs.items()}
        values = reference(self.program, data)
        return sum(int(np.count_nonzero(values[t].data if is_sparse(values[t]) else values[t]))
                   for t, _, _ in self.outputs.values())

    def problem(self, index: int, outputs: dict, window: Window) -> str | None:
        """None when the window's partial-sum `outputs` equal `expected`; else what differs.
        They are removed from `outputs` (checked, a window need not hold them: each is the
        whole output's size)."""
        want = self.expected(window)
        found = None
        for name, (tensor, _, _) in self.outputs.items():
            got = outputs.pop(name)
            got = got.rows(0, np.arange(got.shape[0])) if hasattr(got, "write_into") else got
            problem = compare(name, got, want[tensor], self.rtol, self.atol)[1]
            found = found or (problem and f"window {window} of kernel {index} (a partial sum over its outer loop, "
                                          f"checked on the inputs cut to the window): {problem}")
        return found


def _pattern(value, tensor):
    """1 where `tensor` (its declaration) stores `value`'s entries, 0 elsewhere."""
    if is_sparse(value):
        value = sp.csr_array(value, copy=True)
        value.data[:] = 1.0
        return value
    stores_all = all(not level.is_compressed for level in tensor.format.levels)
    return np.ones_like(value, dtype=np.float64) if stores_all else (np.asarray(value) != 0).astype(np.float64)


def _placed(value, cut: Cut | None, fill: float, window: Window, extent: int):
    """A cut output at the window's coordinates along the outer variable's dimension, `fill`
    elsewhere (as is where the outer variable does not index it)."""
    if cut is None:
        return value
    value = value.toarray() if is_sparse(value) else np.asarray(value)
    shape = list(value.shape)
    shape[cut.dim] = extent * cut.block
    out = np.full(shape, fill)
    index = [slice(None)] * len(shape)
    index[cut.dim] = window_rows(window, extent, cut.block)
    out[tuple(index)] = value
    return out


def _leaf_cuts(region, outer: str) -> dict[str, Cut] | None:
    """Input -> how the outer variable indexes it, over the region's leaves; None where one
    array is read both cut and whole, or cut along two dimensions (no single cut fits)."""
    seen: dict[str, Cut | None] = {}
    for leaf in region.leaves:
        dims = [d for d, index in enumerate(leaf.indices) if index == outer]
        block = leaf.format.block
        cut = Cut(dims[0], int(block[dims[0]]) if block else 1) if len(dims) == 1 else None
        if len(dims) > 1 or seen.setdefault(leaf.tensor, cut) != cut:
            return None
    return {name: cut for name, cut in seen.items() if cut is not None}


def _output_cut(region, tensor: str, outer: str) -> Cut | None:
    """Where the outer variable indexes the region's output `tensor` (None: a sum over it)."""
    indices = region.instances[region.output_instance[tensor]].out_indices
    return Cut(indices.index(outer)) if outer in indices else None


def partial_sums(kernel, values: dict, rtol: float = 1e-6, atol: float = 1e-9) -> PartialSums | None:
    """The check of `kernel`'s windows against its ops on inputs cut along its outer variable
    (`values`: the reference's, holding what the kernel reads); None where the inputs cannot be
    cut so (`_leaf_cuts`)."""
    region, outer = kernel.region, kernel.order[0]
    cuts = _leaf_cuts(region, outer) if region is not None else None
    if cuts is None:
        return None
    program, group = region.program, set(kernel.group)
    ops = [op for op in program.ops if op_output(op) in group]
    if not all(isinstance(op, IndexOp) for op in ops):
        return None
    read = [n for op in ops for n in op.tensors_read if n not in group]
    tensors = {n: _free_dims(program.tensors[n], {cuts[n].dim} if n in cuts else set()) for n in read}
    for op in ops:
        indexed = {i for access in op.inputs for i in access.indices if isinstance(i, str)}
        tensors[op_output(op)] = _free_dims(program.tensors[op_output(op)],
                                            {d for d, i in enumerate(op.output.indices) if i in indexed})
    outputs, by_rows = {}, outer_dims(kernel.graph)  # outputs by rows are checked on the reference's rows
    for name, meta in kernel.graph.tensors.items():
        if meta.role == "output" and name not in by_rows:
            tensor = meta.stores(name)
            outputs[name] = (tensor, _output_cut(region, tensor, outer), meta.fill)
    sub = Program(f"{program.name}, kernel {kernel.index}", tensors, list(dict.fromkeys(read)),
                  [t for t, _, _ in outputs.values()], ops)
    inputs = {n: sliceable(values[n], cuts[n].dim) if n in cuts else values[n] for n in sub.inputs}
    return PartialSums(sub, inputs, cuts, outputs, outer_extent(kernel.graph), rtol, atol)


def _free_dims(tensor, dims: set[int]):
    """`tensor` with the shape of `dims` left to the data."""
    return replace(tensor, shape=tuple(None if d in dims else s for d, s in enumerate(tensor.shape)))
