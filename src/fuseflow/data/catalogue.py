"""The real graphs shipped inside the package, with where they come from and their checksums.

Cora, CiteSeer, Cora-ML and DBLP (about 2.7 MB together, in the `.npz` format of `npz.py`) are package
data, so `load_graph("cora")` works right after `pip install fuseflow`, with no network and no
data directory. Each file is checked against its SHA-256 the first time a process reads it.

    >>> sorted(SHIPPED)
    ['citeseer', 'cora', 'cora_ml', 'dblp']
    >>> shipped_path("cora").name
    'cora.npz'
    >>> print(SHIPPED["cora_ml"].source.split(";")[0])
    CitationFull "cora_ml" graph of Bojchevski & Günnemann (ICLR 2018)
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import UserError


@dataclass(frozen=True)
class ShippedGraph:
    """A graph file in `fuseflow/data/files/`: its SHA-256, origin and licence."""

    file: str
    sha256: str
    source: str
    licence: str


_PLANETOID = ("Planetoid split of Yang, Cohen & Salakhutdinov (ICML 2016), as PyG's Planetoid loader "
              "assembles it; the underlying graph from Sen et al. (AI Magazine 2008)")
SHIPPED = {
    "cora": ShippedGraph("cora.npz", "825c38508e329ec4690a2c45e847e81cdac80d44a74d1a6a58fe1c30d9721a85",
                         f'"Cora": {_PLANETOID}', "MIT (github.com/kimiyoung/planetoid, (c) 2016 Zhilin Yang)"),
    "citeseer": ShippedGraph("citeseer.npz", "78e63304d5ec96e73068530d660e1cb07860127243069329572a15e5ef1f5c7d",
                             f'"CiteSeer": {_PLANETOID}',
                             "MIT (github.com/kimiyoung/planetoid, (c) 2016 Zhilin Yang)"),
    "cora_ml": ShippedGraph("cora_ml.npz", "24d6eceb8f93136c88bbe0c09253c954b4b193bc073a640be991d3365d668ab0",
                            'CitationFull "cora_ml" graph of Bojchevski & Günnemann (ICLR 2018); '
                            "converted from the graph2gauss data file as PyG's CitationFull reads it",
                            "MIT (github.com/abojchevski/graph2gauss, (c) 2018 Aleksandar Bojchevski)"),
    "dblp": ShippedGraph("dblp.npz", "ef0ae119fd23a2516fa68b4c6e1585086c2b6d5385e27ca7b755a3e5d7e1de8c",
                         'CitationFull "dblp" graph of Bojchevski & Günnemann (ICLR 2018); '
                         "converted from the graph2gauss data file as PyG's CitationFull('DBLP') reads it",
                         "MIT (github.com/abojchevski/graph2gauss, (c) 2018 Aleksandar Bojchevski)"),
}


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def shipped_path(name: str) -> Path:
    """The package-data file of a shipped graph (not yet checked)."""
    return Path(str(resources.files(__package__).joinpath("files", SHIPPED[name].file)))


@functools.lru_cache(maxsize=None)
def verified_path(name: str) -> Path:
    """The package-data file of `name`, after checking its SHA-256 (once per process)."""
    path = shipped_path(name)
    if not path.is_file():
        raise UserError(f"the shipped dataset file {SHIPPED[name].file} is missing", str(path.parent),
                        "reinstall fuseflow, or pass --data-dir with your own copy")
    if sha256_of(path) != SHIPPED[name].sha256:
        raise UserError(f"the shipped dataset file {SHIPPED[name].file} does not match its checksum",
                        str(path), "reinstall fuseflow")
    return path
