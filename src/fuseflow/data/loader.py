"""`load_graph`: one entry point for built-in, shipped, downloaded, file and synthetic graphs.

    >>> "synthetic:cora" in list_datasets()
    True
    >>> load_graph("karate").describe().nodes
    34
    >>> load_graph("cora").describe().nodes  # shipped with the package
    2708
    >>> load_graph("synthetic:mag", scale=0.001).describe().stored_edges
    5416
"""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from .cache import fetch, is_url
from .catalogue import SHIPPED, verified_path
from .graphs import Graph, karate
from .npz import read_npz
from .planetoid import load_planetoid
from .synthetic import SPECS, generate

FILE_DATASETS = tuple(SHIPPED)  # shipped as package data; a data directory may hold its own copies
PLANETOID = {"cora": "Cora", "citeseer": "CiteSeer"}  # also readable from Planetoid raw files


def list_datasets() -> list[str]:
    """Every name `load_graph` accepts (besides a path to an .npz file or a checked URL)."""
    return ["karate", *FILE_DATASETS, *(f"synthetic:{k}" for k in SPECS)]


def load_graph(name_or_path, *, data_dir=None, scale: float = 1.0, seed: int = 0, budget=None) -> Graph:
    """The graph `name_or_path` names: a dataset by name (see `list_datasets`), a path to a graph
    `.npz`, a URL with its checksum (`https://.../g.npz#sha256=HEX`, downloaded once into the
    cache, see `cache.py`), or a `Graph` (returned as it is).

    `cora`, `citeseer`, `cora_ml` and `dblp` are shipped with fuseflow; with `data_dir`, they are read
    from `<data_dir>/<name>.npz` (or Planetoid raw files `ind.<name>.*`) instead, and downloads
    are cached there. `scale` (nodes and edges multiplied) and `seed` apply to the `synthetic:*`
    datasets only. `budget` (a `fuseflow.memory.Budget`) bounds what loading may allocate.
    """
    if isinstance(name_or_path, Graph):
        return name_or_path
    text = str(name_or_path)
    if text.startswith("synthetic:"):
        return generate(text.split(":", 1)[1], scale=scale, seed=seed, budget=budget)
    if scale != 1.0:
        raise UserError(f"scale={scale!r} given for {text!r}; scale applies to synthetic:* datasets only",
                        fix=f"drop scale, or use synthetic:{text}" if text in FILE_DATASETS else "drop scale")
    if text == "karate":
        return karate()
    if is_url(text):
        return read_npz(fetch(text, data_dir, budget), budget=budget)
    if text in FILE_DATASETS:
        return _named_file(text, data_dir, budget)
    path = Path(text)
    if path.suffix == ".npz" or path.exists():
        if path.is_dir():
            raise UserError("a directory is not a graph file", where=text,
                            fix="give an .npz file, or pass the directory as --data-dir")
        return read_npz(path, budget=budget)
    raise UserError(f"unknown dataset {text!r}",
                    fix=f"use one of {', '.join(list_datasets())}, a path to an .npz graph file "
                        "or an https://...npz#sha256=HEX URL")


def _named_file(name: str, data_dir, budget) -> Graph:
    if data_dir is None:
        return read_npz(verified_path(name), name=name, budget=budget)
    directory = Path(data_dir)
    npz = directory / f"{name}.npz"
    if npz.is_file():
        return read_npz(npz, name=name, budget=budget)
    if name in PLANETOID:  # Planetoid raw files, flat or in PyG's <root>/<Name>/raw layout
        for raw in (directory, directory / PLANETOID[name] / "raw"):
            if (raw / f"ind.{name}.x").is_file():
                return load_planetoid(raw, name, budget=budget)
    raise UserError(f"dataset file {name}.npz not found", where=str(directory),
                    fix=f"put {name}.npz (docs/datasets.md) in that directory, or drop --data-dir to use "
                        "the copy shipped with fuseflow")
