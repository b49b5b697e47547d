"""Program inputs from an .npz archive, keyed by input name or `arg0, arg1, ...` in argument order
(a key that is an input's name is that input, whatever its position).

    >>> import io, numpy as np
    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir("tests/mlir/spmv.mlir")
    >>> buf = io.BytesIO(); np.savez(buf, arg0=np.eye(64, 48), x=np.ones(48)); _ = buf.seek(0)
    >>> sorted((k, v.shape) for k, v in read_inputs(buf, p, "--inputs").items())
    [('A', (64, 48)), ('x', (48,))]
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import UserError
from ..memory import Budget
from .archive import read_arrays


def read_inputs(path, program, where: str, budget: Budget | None = None) -> dict[str, np.ndarray]:
    """Float64 arrays by input name, checked by `check_input` (real, non-empty, finite); an
    unknown key, or an input given twice (as `arg0` and by name), is a UserError naming `where`."""
    label = f"{where} {path}" if isinstance(path, (str, bytes)) or hasattr(path, "__fspath__") else where
    arrays = read_arrays(path, label, budget, copies=2.0, what=f"inputs {path}")
    names = {f"arg{k}": name for k, name in enumerate(program.inputs)}
    data, keys = {}, {}
    for key, array in arrays.items():
        name = key if key in program.inputs else names.get(key, key)  # a name wins over a position
        if name not in program.inputs:
            raise UserError(f"the file holds {key!r}, which is not an input of {program.name}", label,
                            f"key arrays arg0..arg{len(names) - 1} or by name "
                            f"({', '.join(f'{k}={v}' for k, v in names.items())})")
        if name in data:
            raise UserError(f"input {name} is given twice (as {keys[name]!r} and {key!r})", label,
                            "keep one of them")
        keys[name] = key
        data[name] = check_input(name, array, label)
    return data


def check_input(name: str, value, where: str):
    """`value` as a float64 array (a scipy sparse matrix stays sparse), refusing what the
    simulator and the reference cannot agree on: non-real dtypes (complex, dates, strings,
    objects), zero-size arrays, NaN and infinities.

    >>> check_input("x", np.array([1, 2], dtype=np.int8), "test").dtype
    dtype('float64')
    >>> check_input("x", np.array([1j]), "test")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    fuseflow.errors.UserError: test: input x has dtype complex128; ... (fix: pass its real part ...)
    """
    sparse = sp.issparse(value)
    array = value if sparse else np.asarray(value)
    if array.dtype.hasobject or array.dtype.fields is not None or array.dtype.kind not in "biuf":
        raise UserError(f"input {name} has dtype {array.dtype}; fuseflow computes on real numbers", where,
                        f"pass its real part ({name}.real) or a float array" if array.dtype.kind == "c"
                        else "pass a bool, integer or floating-point array")
    if 0 in array.shape:
        raise UserError(f"input {name} is empty (shape {array.shape})", where,
                        "every dimension must be at least 1")
    array = array.astype(np.float64, copy=False)
    values = array.data if sparse else array
    finite = np.isfinite(values)
    if not finite.all():
        first = np.argwhere(~finite)[0]
        at = (tuple(int(c[first[0]]) for c in array.tocoo().coords) if sparse else tuple(int(i) for i in first))
        raise UserError(f"input {name} holds {values[tuple(first)]} at {at}", where,
                        "replace NaN and infinite values: the simulator skips stored zeros, where "
                        "0 x inf would be NaN, so its result cannot match IEEE arithmetic")
    return array
