"""Sparse Abstract Machine dataflow graphs: primitives, graph, verifier, exporters."""
from .draw import svg
from .graph import Node, SamGraph, Stream
from .primitives import PRIMITIVES, Primitive

SamGraph.picture = svg  # a graph shows its picture in notebooks; graph.py itself knows no drawing

__all__ = ["SamGraph", "Node", "Stream", "PRIMITIVES", "Primitive"]
