"""`load_graph`: one entry point for built-in, file and synthetic graphs.

    >>> "synthetic:cora" in list_datasets()
    True
    >>> load_graph("karate").describe().nodes
    34
    >>> load_graph("synthetic:mag", scale=0.001).describe().stored_edges
    5416
"""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from .graphs import Graph, karate
from .npz import read_npz
from .planetoid import load_planetoid
from .synthetic import SPECS, generate

FILE_DATASETS = ("cora", "citeseer", "cora_ml")  # read from <data_dir>/<name>.npz
PLANETOID = {"cora": "Cora", "citeseer": "CiteSeer"}  # also readable from Planetoid raw files


def list_datasets() -> list[str]:
    """Every name `load_graph` accepts (besides a path to an .npz file)."""
    return ["karate", *FILE_DATASETS, *(f"synthetic:{k}" for k in SPECS)]


def default_data_dir() -> Path | None:
    """`../shared/data` next to the fuseflow repository this package is run from, if it exists."""
    for root in Path(__file__).resolve().parents:
        project = root / "pyproject.toml"
        if project.is_file() and 'name = "fuseflow"' in project.read_text(errors="replace"):
            candidate = root.parent / "shared" / "data"
            return candidate if candidate.is_dir() else None
    return None


def load_graph(name_or_path, *, data_dir=None, scale: float = 1.0, seed: int = 0) -> Graph:
    """A dataset by name (see `list_datasets`) or a path to a graph `.npz`.

    `data_dir` is where `cora.npz`, `citeseer.npz`, `cora_ml.npz` (or Planetoid raw files
    `ind.cora.*`) live; without it, `../shared/data` beside the repository is used when present.
    `scale` (nodes and edges multiplied) and `seed` apply to the `synthetic:*` datasets only.
    """
    text = str(name_or_path)
    if text.startswith("synthetic:"):
        return generate(text.split(":", 1)[1], scale=scale, seed=seed)
    if scale != 1.0:
        raise UserError(f"scale={scale!r} given for {text!r}; scale applies to synthetic:* datasets only",
                        fix=f"drop scale, or use synthetic:{text}" if text in FILE_DATASETS else "drop scale")
    if text == "karate":
        return karate()
    if text in FILE_DATASETS:
        return _named_file(text, data_dir)
    path = Path(text)
    if path.suffix == ".npz" or path.exists():
        if path.is_dir():
            raise UserError("a directory is not a graph file", where=text,
                            fix="give an .npz file, or pass the directory as data_dir=")
        return read_npz(path)
    raise UserError(f"unknown dataset {text!r}",
                    fix=f"use one of {', '.join(list_datasets())}, or a path to an .npz graph file")


def _named_file(name: str, data_dir) -> Graph:
    if data_dir is None:
        data_dir = default_data_dir()
        if data_dir is None:
            raise UserError(f"dataset {name!r} is read from {name}.npz, but no data_dir was given "
                            "and ../shared/data beside the repository does not exist",
                            fix=f"pass data_dir=<directory with {name}.npz>, or use synthetic:{name}"
                            if name in SPECS else f"pass data_dir=<directory with {name}.npz>")
    directory = Path(data_dir)
    npz = directory / f"{name}.npz"
    if npz.is_file():
        return read_npz(npz, name=name)
    if name in PLANETOID:  # Planetoid raw files, flat or in PyG's <root>/<Name>/raw layout
        for raw in (directory, directory / PLANETOID[name] / "raw"):
            if (raw / f"ind.{name}.x").is_file():
                return load_planetoid(raw, name)
    raise UserError(f"dataset file {name}.npz not found", where=str(directory),
                    fix=f"put {name}.npz (docs/datasets.md) in that directory or pass another data_dir=")
