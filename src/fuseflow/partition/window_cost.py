"""The heuristic cost model (`fusion.estimate`) evaluated on one window of a kernel's outer loop:
the sampled mode's auxiliary variable.

For a window, every array the kernel reads that the outer variable indexes is cut to the
window's rows (tiles of rows for a blocked tensor), the outer variable's extent becomes the
window's width, and the kernel's estimate is taken as the whole kernel's is: from the level
densities of what it reads (here the reference's values of its inputs, intermediates included).
Its cycles (busiest stream, a share of the rest, a fixed start-up) are the window's x.

    >>> import fuseflow
    >>> from fuseflow.pipeline import prepared
    >>> from fuseflow.partition.windows import reference_values
    >>> from fuseflow.sim.window import Window
    >>> p = fuseflow.from_mlir("tests/mlir/spmv.mlir")
    >>> data, compiled = prepared(p, "full", None, 1, 0.3)
    >>> x = window_estimates(compiled, compiled.kernels[0], p, reference_values(p, data),
    ...                      Window.even(64, 4))
    >>> len(x), bool((x > 0).all())
    (4, True)
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..fusion.estimate import kernel_estimate
from ..ir.background import backgrounds
from ..ir.stats import DataStats
from ..ir.values import is_sparse
from ..sim.window import Window
from .partials import sliceable


class _Overlay:
    """Statistics of the window's cut arrays, falling back to the whole arrays' for the rest."""

    def __init__(self, cut: DataStats, whole: DataStats):
        self.cut, self.whole = cut, whole

    def __contains__(self, name: str) -> bool:
        return name in self.cut or name in self.whole

    def level_densities(self, name: str, fmt):
        return (self.cut if name in self.cut else self.whole).level_densities(name, fmt)


def _cut_dims(kernel, outer: str) -> dict[str, tuple[int, int]]:
    """Array name -> (its dimension the outer variable indexes, rows per outer coordinate)."""
    dims = {}
    for leaf in kernel.region.leaves:
        for d, index in enumerate(leaf.indices):
            if index == outer:
                block = leaf.format.block
                dims[leaf.tensor] = (d, int(block[d]) if block else 1)
    return dims


def _cut(array, dim: int, lo: int, hi: int):
    """Rows lo:hi of `array` along `dim`."""
    if is_sparse(array):
        array = sp.csr_array(array) if dim == 0 else sp.csc_array(array)
        return array[lo:hi] if dim == 0 else array[:, lo:hi]
    index = [slice(None)] * np.ndim(array)
    index[dim] = slice(lo, hi)
    return np.asarray(array)[tuple(index)]


def window_estimates(compiled, kernel, program, values: dict, windows: list[Window], budget=None) -> np.ndarray:
    """The heuristic's cycles of `kernel` restricted to each of `windows` (see the module doc);
    the statistics' masks asked of `budget` (`memory.Budget`) first, when given."""
    outer = kernel.order[0]
    fills = backgrounds(program)
    dims = _cut_dims(kernel, outer)
    names = {leaf.tensor for leaf in kernel.region.leaves if leaf.tensor in values}
    whole = DataStats({n: values[n] for n in names}, {n: fills.get(n, 0.0) for n in names}, budget)
    pars = compiled.schedule.pars.get(kernel.index, [])
    out = np.zeros(len(windows))
    arrays = {n: sliceable(values[n], d) for n, (d, _) in dims.items() if n in values}  # converted once
    for k, window in enumerate(windows):
        (lo, hi), = window.ranges or ((0, 0),)
        cut = DataStats({n: _cut(arrays[n], d, lo * b, hi * b) for n, (d, b) in dims.items() if n in arrays},
                        {n: fills.get(n, 0.0) for n in dims}, budget)
        out[k] = kernel_estimate(kernel, _Overlay(cut, whole), pars, {outer: hi - lo}).cycles
    return out
