"""Built-in sparse models (PyTorch modules), their data and fusion presets (`registry`), and how
a model is named (`resolve`, which imports no model).

`fuseflow.models.GCN` is loaded on first use: torch is slow to import.
"""
from __future__ import annotations

__all__ = ["GCN"]


def __getattr__(name: str):
    if name == "GCN":
        from .gcn import GCN  # noqa: PLC0415 - torch is slow to import; naming a model needs none of it

        return GCN
    raise AttributeError(f"module 'fuseflow.models' has no attribute {name!r}")
