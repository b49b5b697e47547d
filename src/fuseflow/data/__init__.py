"""Datasets: graphs as scipy CSR adjacency (unweighted, no self loops) + dense features + labels.

`load_graph(name_or_path)` reads a built-in (`karate`), a shipped real graph (`cora`,
`citeseer`, `cora_ml`, `dblp`, package data), any `.npz` in the format of `npz.py`, a checked URL
(downloaded once into a cache, `cache.py`), or a `synthetic:*` graph matching the published
statistics; `list_datasets()` names them; `Graph.describe()` summarises. `from_scipy` and
`from_pyg` turn other libraries' objects into a `Graph`.
"""
from .adapters import from_pyg, from_scipy
from .cache import cache_dir
from .graphs import Graph, GraphStats, from_edges, karate
from .loader import list_datasets, load_graph
from .npz import read_npz, save_graph
from .planetoid import load_planetoid
from .synthetic import SPECS as SYNTHETIC_SPECS

__all__ = ["Graph", "GraphStats", "from_edges", "from_pyg", "from_scipy", "karate", "load_graph",
           "list_datasets", "cache_dir", "save_graph", "read_npz", "load_planetoid", "SYNTHETIC_SPECS"]
