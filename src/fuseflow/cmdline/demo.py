"""`fuseflow demo`: the built-in 2-layer GCN on the karate club, imported through torch-mlir and
checked against PyTorch eager.

    >>> run_demo() == 0  # doctest: +SKIP
"""
from __future__ import annotations

import time

import numpy as np

from ..data import karate
from ..frontend import from_torch
from ..ir.reference import reference


def run(args) -> int:
    return run_demo(seed=args.seed)


def run_demo(seed: int = 0) -> int:
    import torch  # noqa: PLC0415 - torch is slow to import; only the demo needs it

    from ..models import GCN  # noqa: PLC0415 - torch is slow to import; only the demo needs it

    graph = karate()
    torch.manual_seed(seed)
    model = GCN(features=graph.features.shape[1], classes=graph.num_classes).eval()
    A = torch.tensor(graph.adjacency.toarray(), dtype=torch.float32)
    X = torch.tensor(graph.features, dtype=torch.float32)
    start = time.perf_counter()
    program = from_torch(model, A.to_sparse_csr(), X, formats={"A": "compressed,compressed"})
    imported = time.perf_counter() - start
    print(program)
    gold = reference(program, {"A": graph.adjacency, "X": graph.features})[program.outputs[0]]
    eager = model(A, X).detach().numpy()
    error = float(np.abs(gold - eager).max())
    print(f"\ndataset karate: {graph.num_nodes} nodes, {graph.adjacency.nnz} stored edges, "
          f"{graph.num_classes} classes")
    print(f"imported {len(program.ops)} ops via torch-mlir in {imported:.1f} s")
    print(f"numpy reference vs PyTorch eager: max abs error {error:.2e}")
    ok = error < 1e-5
    print("reference check:", "PASSED" if ok else "FAILED")
    return 0 if ok else 1
