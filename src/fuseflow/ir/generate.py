"""Seeded random input data that respects each input's declared shape and format.

    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir('''
    ... #dcsr = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
    ... func.func @f(%A: tensor<100x100xf32, #dcsr>) -> tensor<100x100xf32, #dcsr> {
    ...   return %A : tensor<100x100xf32, #dcsr>
    ... }''')
    >>> A = random_inputs(p, density=0.05, seed=1)["A"]
    >>> A.shape, round(float((A != 0).mean()), 2)
    ((100, 100), 0.05)
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import UserError
from .program import Program
from .values import DENSE_LIMIT, check_dense

INTEGER_DTYPES = ("i32", "i64")


def random_tensor(shape, density: float = 1.0, block=None, rng=None) -> np.ndarray:
    """Dense array with (block-)random nonzero positions at `density`, values in [-1, 1) and nonzero."""
    rng = rng if rng is not None else np.random.default_rng(0)
    if not 0.0 < density <= 1.0:
        raise UserError(f"density {density} is outside (0, 1]")
    values = rng.uniform(0.1, 1.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    if density >= 1.0:
        return values
    if block:
        grid = tuple(-(-s // b) for s, b in zip(shape, block))
        mask = _mask(grid, density, rng)
        for axis, b in enumerate(block):
            mask = np.repeat(mask, b, axis=axis)
        mask = mask[tuple(slice(0, s) for s in shape)]
    else:
        mask = _mask(shape, density, rng)
    return values * mask


def _mask(shape, density, rng) -> np.ndarray:
    size = int(np.prod(shape))
    count = max(1, int(round(size * density)))
    flat = np.zeros(size, dtype=bool)
    flat[rng.choice(size, size=count, replace=False)] = True
    return flat.reshape(shape)


def random_inputs(program: Program, density: float = 0.1, seed: int = 0, shapes: dict | None = None,
                  densities: dict | None = None) -> dict[str, np.ndarray]:
    """Data for every input of `program` without known constant data ({name: numpy array}, or a scipy sparse
    matrix for a sparse input too large to hold dense); integer inputs (i32, i64) hold whole
    numbers.

    - `density`: share of stored entries of sparse inputs (dense inputs are full); `densities`:
      {input name: share} for particular inputs.
    - `seed`: an int seeding the values and patterns.
    - `shapes`: {input name: shape tuple} for inputs with dynamic dimensions.
    """
    rng = np.random.default_rng(seed)
    shapes, densities = shapes or {}, densities or {}
    data = {}
    for name in program.inputs:
        if name in program.constants:
            continue
        tensor = program.tensors[name]
        shape = tuple(shapes.get(name, tensor.shape))
        if None in shape:
            raise UserError(f"input {name} has a dynamic shape {tensor.shape}", None,
                            f"give its shape, e.g. shapes={{'{name}': (...)}}")
        sparse = not tensor.format.is_dense
        share = densities.get(name, density if sparse else 1.0)
        if sparse and len(shape) == 2 and not tensor.format.block and shape[0] * shape[1] > DENSE_LIMIT:
            data[name] = random_sparse(shape, share, rng)
        else:
            check_dense(shape, f"random input {name}")
            data[name] = random_tensor(shape, share, tensor.format.block, rng)
        if tensor.dtype in INTEGER_DTYPES:  # whole numbers in [-8, 8], zero where the pattern has none
            data[name] = np.sign(data[name]) * np.ceil(np.abs(data[name]) * 8)
    return data


def complete_inputs(program: Program, given: dict, density: float = 0.1, seed: int = 0,
                    shapes: dict | None = None) -> dict:
    """The given inputs plus `random_inputs` data for the others; nothing is generated when
    every input without constant data is given (generating would cost as much as the data).

    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir("tests/mlir/spmv.mlir")
    >>> sorted(complete_inputs(p, {"x": np.ones(p.tensors["x"].shape)}))
    ['A', 'x']
    """
    if not set(program.inputs) - set(program.constants) - set(given):
        return dict(given)
    return {**random_inputs(program, density=density, seed=seed, shapes=shapes), **given}


def random_sparse(shape, density: float, rng) -> sp.csr_array:
    """A scipy sparse matrix with about `density` of its entries nonzero, values as
    `random_tensor`'s, built without a dense array (for inputs too large to be dense)."""
    if not 0.0 < density <= 1.0:
        raise UserError(f"density {density} is outside (0, 1]")
    rows, cols = shape
    count = max(1, int(round(rows * cols * density)))
    keys = np.unique(rng.integers(0, rows * cols, size=count))
    values = rng.uniform(0.1, 1.0, size=keys.shape[0]) * rng.choice([-1.0, 1.0], size=keys.shape[0])
    return sp.csr_array((values, (keys // cols, keys % cols)), shape=shape)
