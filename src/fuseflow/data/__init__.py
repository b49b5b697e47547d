"""Datasets: graphs as scipy CSR adjacency (unweighted, no self loops) + dense features + labels.

`load_graph(name_or_path)` reads a built-in (`karate`), a file dataset (`cora`, `citeseer`,
`cora_ml` from a data directory), any `.npz` in the format of `npz.py`, or a `synthetic:*` graph
matching the published statistics; `list_datasets()` names them; `Graph.describe()` summarises.
"""
from .graphs import Graph, GraphStats, from_edges, karate
from .loader import default_data_dir, list_datasets, load_graph
from .npz import read_npz, save_graph
from .planetoid import load_planetoid
from .synthetic import SPECS as SYNTHETIC_SPECS

__all__ = ["Graph", "GraphStats", "from_edges", "karate", "load_graph", "list_datasets",
           "default_data_dir", "save_graph", "read_npz", "load_planetoid", "SYNTHETIC_SPECS"]
