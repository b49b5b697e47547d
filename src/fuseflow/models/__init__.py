"""Built-in sparse models (PyTorch modules)."""
from .gcn import GCN

__all__ = ["GCN"]
