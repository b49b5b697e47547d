"""fuseflow: fusion-centric compilation of sparse models onto streaming dataflow hardware.

    >>> import fuseflow
    >>> p = fuseflow.from_mlir("tests/mlir/spmv.mlir")  # doctest: +SKIP
    >>> outputs = fuseflow.reference(p, fuseflow.random_inputs(p))  # doctest: +SKIP
"""
from .errors import FuseflowError, NotSupported, UserError
from .frontend import from_mlir, from_torch
from .ir import Program, TensorFormat, reference, verify
from .ir.generate import random_inputs

__all__ = ["FuseflowError", "NotSupported", "Program", "TensorFormat", "UserError", "from_mlir",
           "from_torch", "random_inputs", "reference", "verify"]
__version__ = "0.1.0"
