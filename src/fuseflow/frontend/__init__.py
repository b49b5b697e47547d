"""Frontends: MLIR text/files and PyTorch modules -> Program."""
from .mlir_import import apply_formats, from_mlir
from .torch_import import from_torch

__all__ = ["from_mlir", "from_torch", "apply_formats"]
