"""Program inputs from an .npz archive, keyed `arg0, arg1, ...` in argument order or by input name.

    >>> import io, numpy as np
    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir("tests/mlir/spmv.mlir")
    >>> buf = io.BytesIO(); np.savez(buf, arg0=np.eye(64, 48), x=np.ones(48)); _ = buf.seek(0)
    >>> sorted((k, v.shape) for k, v in read_inputs(buf, p, "--inputs").items())
    [('A', (64, 48)), ('x', (48,))]
"""
from __future__ import annotations

import numpy as np

from ..errors import UserError


def read_inputs(path, program, where: str) -> dict[str, np.ndarray]:
    """Dense float64 arrays by input name; an unknown key is a UserError naming `where`."""
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read inputs from {path}: {err}", where) from None
    names = {f"arg{k}": name for k, name in enumerate(program.inputs)}
    data = {}
    for key in archive.files:
        name = names.get(key, key)
        if name not in program.inputs:
            raise UserError(f"{path} holds {key!r}, which is not an input of {program.name}", where,
                            f"key arrays arg0..arg{len(names) - 1} or by name "
                            f"({', '.join(f'{k}={v}' for k, v in names.items())})")
        data[name] = np.asarray(archive[key], dtype=np.float64)
    return data
