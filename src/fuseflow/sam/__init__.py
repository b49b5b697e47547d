"""Sparse Abstract Machine dataflow graphs: primitives, graph, verifier, exporters."""
from .draw import svg
from .graph import GraphTensor, Node, SamGraph, Stream
from .primitives import PRIMITIVES, Primitive

SamGraph.picture = svg  # a graph shows its picture in notebooks; graph.py itself knows no drawing

__all__ = ["SamGraph", "GraphTensor", "Node", "Stream", "PRIMITIVES", "Primitive"]
