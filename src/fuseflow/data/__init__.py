"""Built-in datasets (graphs as scipy CSR adjacency + dense features)."""
from .graphs import Graph, karate

__all__ = ["Graph", "karate"]
