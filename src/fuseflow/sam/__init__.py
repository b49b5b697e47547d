"""Sparse Abstract Machine dataflow graphs: primitives, graph, verifier, exporters."""
from .graph import Node, SamGraph, Stream
from .primitives import PRIMITIVES, Primitive

__all__ = ["SamGraph", "Node", "Stream", "PRIMITIVES", "Primitive"]
