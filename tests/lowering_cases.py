"""Shared cases for the lowering and simulation tests: programs, schedules and orders."""
from __future__ import annotations

import glob
import itertools
import os
import sys

import numpy as np

import fuseflow
from fuseflow.errors import UserError
from fuseflow.fusion.compile import compile_schedule
from fuseflow.fusion.nesting import valid_orders
from fuseflow.ir.canonicalize import prepare
from fuseflow.ir.program import op_output

HERE = os.path.dirname(__file__)
MLIR_FILES = sorted(glob.glob(os.path.join(HERE, "mlir", "*.mlir")))
DYNAMIC_SHAPE = 6  # size given to every dynamic dimension


def fix_data(path: str, data: dict) -> dict:
    """Keep inputs inside the semantics fuseflow shares with PyTorch: a masked softmax row needs at
    least one unmasked entry (an all-masked row is NaN in PyTorch, 0 in fuseflow; see
    fuseflow.ir.background)."""
    if os.path.basename(path) == "masked_softmax.mlir":
        M = data["M"].copy()
        rows = np.arange(M.shape[0])
        M[rows, rows % M.shape[1]] = 1.0
        data = {**data, "M": M}
    return data


def load(path: str):
    program = fuseflow.from_mlir(path)
    shapes = {n: tuple(DYNAMIC_SHAPE if d is None else d for d in program.tensors[n].shape)
              for n in program.inputs if None in program.tensors[n].shape}
    return program, shapes


def with_gold(path: str, seed: int, density: float = 0.3):
    """(program, shapes, random inputs, reference outputs) of a tests/mlir file."""
    program, shapes = load(path)
    data = fix_data(path, fuseflow.random_inputs(program, density=density, seed=seed, shapes=shapes))
    return program, shapes, data, fuseflow.reference(program, data)


def torch_programs():
    """Small instances of the frontend's PyTorch models, with their dense inputs."""
    import torch

    sys.path.insert(0, HERE)
    import torch_models as tm

    torch.manual_seed(0)
    n = 10
    A = (torch.rand(n, n) < 0.3).float()
    M = torch.zeros(16, 16)
    M[:8, :8] = M[8:, 8:] = M[:8, 8:] = 1
    cases = {
        "gcn": (tm.GCN(6, 4, 3), (A.to_sparse_csr(), torch.randn(n, 6)), {}),
        "graphsage": (tm.GraphSAGE(6, 4, 3), (A.to_sparse_csr(), torch.randn(n, 6)), {}),
        "sae": (tm.SparseAutoencoder(12, 5), (torch.randn(4, 12),),
                {"enc.weight": "compressed,compressed", "dec.weight": "compressed,compressed"}),
        "attention": (tm.MaskedAttention(0.5), (M.to_sparse_csr(), torch.randn(16, 4), torch.randn(16, 4),
                                                torch.randn(16, 4)), {}),
        "layernorm": (tm.LayerNormModel(6), (torch.randn(5, 6),), {}),
        "ffn": (tm.FeedForward(6, 8), (torch.randn(5, 6),), {}),
    }
    out = {}
    for name, (model, inputs, formats) in cases.items():
        program = fuseflow.from_torch(model, *inputs, formats=formats)
        names = program.inputs[:len(inputs)]
        data = {k: (v.to_dense() if v.layout != torch.strided else v).numpy() for k, v in zip(names, inputs)}
        out[name] = (program, data)
    return out


def schedules(program, shapes=None) -> list[str]:
    """unfused, full, and a two-group partial fusion when the program has more than two ops."""
    canonical = prepare(program, shapes)
    from fuseflow.ir.program import IndexOp

    names = [op_output(op) for op in canonical.ops if isinstance(op, IndexOp)]  # reshapes stay alone
    found = []
    for layout in ("", " layout=induced"):
        found += ["unfused" + layout, "full" + layout]
        if len(names) > 2:
            half = len(names) // 2
            found.append(f"fusion=[{','.join(names[:half])}][{','.join(names[half:])}]" + layout)
    return found


def order_variants(program, schedule: str, shapes=None, limit: int = 24) -> list[str]:
    """The schedule with each group's valid orders (up to `limit`), one group varied at a time;
    variants whose order leaves a later group without any valid order are left out."""
    base = compile_schedule(program, schedule, shapes)
    variants = [schedule]
    for kernel in base.kernels:
        if kernel.region is None:
            continue
        for order in itertools.islice(valid_orders(kernel.region), 1, limit):
            variant = f"{schedule} order.{kernel.index}={','.join(order)}"
            try:
                compile_schedule(program, variant, shapes)
            except UserError as err:
                if "has no valid order" not in str(err):
                    raise
                continue
            variants.append(variant)
    return variants


def close(a, b) -> bool:
    return bool(np.allclose(a, b, rtol=1e-9, atol=1e-9, equal_nan=True))
