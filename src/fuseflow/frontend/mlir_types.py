"""MLIR types, encodings, constants and locations -> fuseflow tensors.

    >>> parse_location('loc("-":9:8)', "gcn.mlir")
    'gcn.mlir:9:8'
"""
from __future__ import annotations

import re

import numpy as np

from ..errors import NotSupported, UserError
from ..ir.formats import COMPRESSED, DENSE, TensorFormat

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.float32,
          "i64": np.int64, "i32": np.int32, "i1": np.bool_}


_WRAPPER_FRAMES = ("fuseflow/frontend/torch_import.py",)


def parse_location(text: str, source: str) -> str:
    """`loc("-":9:8)` -> `source:9:8`; unknown locations give just `source`. A call-site chain
    (`callsite("linear.py":134:0 at "model.py":24:0)`) gives its outermost caller, the line of the
    model that made the op.

    >>> parse_location('loc(callsite("linear.py":134:0 at "gcn.py":24:0))', "x")
    'gcn.py:24:0'
    """
    found = [f for f in re.findall(r'"([^"]*)":(\d+):(\d+)', text)
             if not f[0].endswith(_WRAPPER_FRAMES)]  # fuseflow's own call into the model
    if not found:
        return source
    file, line, col = found[-1]
    file = source if file in ("-", "") else file
    return f"{file}:{line}:{col}"


def element_dtype(element_type, where: str) -> str:
    """Floating-point types, i1 (booleans such as `M == 0`, computed as 1.0 / 0.0) and i32/i64
    (computed in float64: exact up to 2**53)."""
    name = str(element_type)
    if name not in ("f32", "f64", "f16", "bf16", "i1", "i32", "i64"):
        raise NotSupported(f"tensors of element type {name} (only floating point, i1, i32 and i64)", where)
    return name


def shape_of(ranked_type, dynamic_size: int) -> tuple[int | None, ...]:
    return tuple(None if d == dynamic_size else int(d) for d in ranked_type.shape)


def format_of(ranked_type, where: str) -> TensorFormat:
    """Per-level format from a `#sparse_tensor.encoding`; dense when there is none."""
    from torch_mlir import ir  # noqa: PLC0415 - torch-mlir's native bindings load when MLIR is read
    from torch_mlir.dialects import sparse_tensor as st  # noqa: PLC0415 - torch-mlir's native bindings load when MLIR is read

    rank = len(ranked_type.shape)
    if ranked_type.encoding is None:
        return TensorFormat.dense(rank)
    enc = st.EncodingAttr(ranked_type.encoding)
    kinds = [st.LevelFormat(int(f)) for f in enc.lvl_formats_enum]
    levels, order, tile, block = [], [], [], {}
    for kind, expr in zip(kinds, enc.dim_to_lvl.results):
        if kind == st.LevelFormat.n_out_of_m:
            raise NotSupported("n:m structured sparsity levels", where)
        level = DENSE if kind == st.LevelFormat.dense else COMPRESSED
        if isinstance(expr, ir.AffineDimExpr):
            levels.append(level)
            order.append(expr.position)
        elif isinstance(expr, ir.AffineFloorDivExpr):
            levels.append(level)
            order.append(ir.AffineDimExpr(expr.lhs).position)
            block[ir.AffineDimExpr(expr.lhs).position] = ir.AffineConstantExpr(expr.rhs).value
        elif isinstance(expr, ir.AffineModExpr):
            if level.is_compressed:
                raise NotSupported("sparse levels inside a block (block tiles must be dense)", where)
            tile.append(ir.AffineDimExpr(expr.lhs).position)
        else:
            raise NotSupported(f"level expression {expr} in a sparse encoding", where)
    if sorted(order) != list(range(rank)):
        raise NotSupported(f"sparse encoding {ranked_type.encoding} (levels do not cover each dimension once)",
                           where)
    block_shape = tuple(block[d] for d in range(rank)) if block else None
    if block and sorted(block) != sorted(tile):
        raise NotSupported(f"sparse encoding {ranked_type.encoding} (mixed blocked and unblocked dims)", where)
    return TensorFormat(tuple(levels), tuple(order), block_shape)


def resource_blobs(text: str) -> dict[str, str]:
    """The hex blobs of `{-# dialect_resources: { builtin: {...} } #-}` by key."""
    match = re.search(r"\{-#.*?dialect_resources\s*:\s*\{(.*)#-\}", text, re.S)
    if not match:
        return {}
    return dict(re.findall(r'([\w.\-]+)\s*:\s*"0x([0-9A-Fa-f]*)"', match.group(1)))


def constant_data(attr, ranked_type, blobs: dict[str, str], where: str) -> np.ndarray | None:
    """Data of a tensor `arith.constant`; None when elided (to be generated later)."""
    from torch_mlir import ir  # noqa: PLC0415 - torch-mlir's native bindings load when MLIR is read

    shape = tuple(ranked_type.shape)
    dtype = DTYPES.get(str(ranked_type.element_type), np.float32)
    text = str(attr)
    if text.startswith("dense_resource<"):
        key = text[len("dense_resource<"):].split(">", 1)[0]  # the text goes on with " : tensor<..>"
        if key == "__elided__" or key not in blobs:
            return None
        raw = bytes.fromhex(blobs[key])[4:]  # the first 4 bytes hold the blob's alignment
        data = np.frombuffer(raw, dtype=dtype)
        if data.size != int(np.prod(shape)):
            raise UserError(f"resource {key} holds {data.size} values, its type needs {int(np.prod(shape))}",
                            where)
        return data.reshape(shape).astype(np.float64)
    if isinstance(attr, ir.DenseElementsAttr) or text.startswith("dense<"):
        dense = ir.DenseElementsAttr(attr)
        if dense.is_splat:
            value = ir.FloatAttr(dense.get_splat_value()).value
            return np.full(shape, value, dtype=np.float64)
        return np.array(ir.DenseFPElementsAttr(attr), dtype=np.float64).reshape(shape)
    raise NotSupported(f"constant attribute {text[:60]}", where)
