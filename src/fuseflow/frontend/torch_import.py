"""PyTorch module -> MLIR (torch-mlir's FX importer) -> Program.

Parameters and buffers become named program inputs (with their data kept as
constants), so a sparse weight can be declared with `formats`. Sparse example
inputs and sparse parameters are traced as dense stand-ins and their layout is
re-attached as a per-level format: PyTorch's eager sparse kernels cover too few
ops (e.g. softmax of a masked product) to trace real models, while the linalg is
the same. A sparse matrix parameter's data stays sparse (a scipy `csr_array`).

    >>> import torch
    >>> class Lin(torch.nn.Module):
    ...     def forward(self, A, x):
    ...         return A @ x
    >>> p = from_torch(Lin(), torch.eye(3).to_sparse_csr(), torch.ones(3, 2))
    >>> print(p.tensors["A"].describe(), "|", str(p.ops[-1]).split(" = ")[1])
    A: f32[3,3] {dense,compressed} | sum[k] A(i,k) * x(k,j)
"""
from __future__ import annotations

import inspect
import os
import re
import traceback
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import FuseflowError, NotSupported, UserError
from ..ir.formats import TensorFormat
from ..ir.program import Program
from .mlir_import import apply_formats, from_mlir
from .torch_rewrite import rewrite


def layout_format(tensor) -> TensorFormat | None:
    """The per-level format that a torch tensor's layout stands for (None if strided)."""
    import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

    rank = tensor.dim()
    if tensor.layout == torch.strided:
        return None
    if tensor.layout == torch.sparse_coo:
        return TensorFormat.all_compressed(rank)
    if rank != 2:
        raise NotSupported(f"{tensor.layout} tensors of rank {rank} as inputs", "from_torch")
    if tensor.layout == torch.sparse_csr:
        return TensorFormat.parse("dense,compressed")
    if tensor.layout == torch.sparse_csc:
        return TensorFormat.parse("dense,compressed;order=1,0")
    if tensor.layout in (torch.sparse_bsr, torch.sparse_bsc):
        block = tuple(int(b) for b in tensor.values().shape[1:3])
        order = "" if tensor.layout == torch.sparse_bsr else ";order=1,0"
        return TensorFormat.parse(f"dense,compressed{order};block={block[0]}x{block[1]}")
    raise NotSupported(f"input layout {tensor.layout}", "from_torch")


def _safe(name: str) -> str:
    return re.sub(r"\W", "_", name)


def from_torch(module, *example_inputs, formats: dict | None = None, name: str | None = None) -> Program:
    """Import `module(*example_inputs)`; returns a Program whose inputs are the example
    inputs (named after `forward`'s parameters) followed by parameters and buffers.

    - `module`: a `torch.nn.Module` (written with `A @ X`, `torch.sparse.mm`/`addmm`,
      `torch.spmm`, sparse tensors built in `forward`, PyG's `GCNConv`/`SAGEConv`).
    - `example_inputs`: one `torch.Tensor` per `forward()` argument, dense or sparse (COO, CSR,
      CSC, BSR, BSC); a sparse one keeps its layout as the input's storage format.
    - `formats`: storage formats to declare, keyed by input or parameter name (or example
      input index): per-level strings such as "dense,compressed" or "compressed,compressed".
    - `name`: the program's name (default: the module's class name).
    """
    return trace_torch(module, *example_inputs, formats=formats).program(name)


@dataclass
class Traced:
    """A module traced and exported by torch-mlir (`trace_torch`: where the module's own code
    runs), not yet read as a Program (`program`: fuseflow's part)."""

    mlir: object  # torch-mlir's module, linalg on tensors
    model_name: str
    given_names: list[str]  # forward()'s parameters: what int keys of `formats` index
    arg_names: list[str]  # the exported function's arguments: inputs, then parameters and buffers
    arg_values: list  # their example values (sparse ones give their layout as a format)
    state: dict  # parameter or buffer name -> its value (constants of the program)
    formats: dict

    def program(self, name: str | None = None) -> Program:
        """The Program of the exported module, formats declared and constants attached."""
        # with debug locations every op records the line of the model's code that produced it
        text = self.mlir.operation.get_asm(enable_debug_info=True)
        try:
            program = from_mlir(text, arg_names=self.arg_names)
        except UserError as err:  # torch-mlir lowered an op outside linalg (e.g. tm_tensor.scan for cumsum)
            if (op := re.search(r"custom op '([\w.]+)'", err.what)) is None:
                raise
            raise NotSupported(f"{self.model_name} uses an op that torch-mlir lowers to {op[1]}, outside "
                               "linalg", "from_torch", TAKEN) from None
        program.name = name or self.model_name
        declared = {n: f for n, x in zip(self.arg_names, self.arg_values) if (f := layout_format(x)) is not None}
        for key, fmt in self.formats.items():
            declared[self.given_names[key] if isinstance(key, int) else _safe(key)] = fmt
        apply_formats(program, declared)
        for n, v in self.state.items():
            program.constants[_safe(n)] = _constant(v)
        return program


def trace_torch(module, *example_inputs, formats: dict | None = None) -> Traced:
    """The first half of `from_torch` (same arguments): `module`'s forward traced (torch.fx)
    and exported (torch.export, torch-mlir), the part that runs the module's own code."""
    import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

    if not isinstance(module, torch.nn.Module):
        raise UserError(f"from_torch needs a torch.nn.Module, got {type(module).__name__}")
    for k, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise UserError(f"example input {k} is a {type(x).__name__}, not a tensor")
    input_names = _input_names(module, len(example_inputs))
    given_names, model_name = input_names, type(module).__name__  # int keys of `formats` index given_names
    source = _source_file(module)
    rewritten = rewrite(module, list(example_inputs), input_names)
    if rewritten is not None:  # torch.sparse ops, sparse tensors built in forward, PyG layers
        module, example_inputs, input_names = rewritten.module, tuple(rewritten.inputs), rewritten.names
    for key in formats or {}:
        if isinstance(key, int) and not 0 <= key < len(input_names):
            raise UserError(f"format given for example input {key}, but there are only {len(input_names)}",
                            "from_torch", "key formats by example-input index or by name")
    state = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    state_names = list(state)
    # the export traces shapes and dtypes only: a sparse input or parameter stands in as a
    # zero-stride dense tensor (no n x n array; the MLIR is the same as from its dense copy)
    dense_inputs = [_stand_in(x) for x in example_inputs]
    values = [v.detach() for v in state.values()]

    class _Functional(torch.nn.Module):
        def forward(self, *tensors):
            n = len(dense_inputs)
            return torch.func.functional_call(module, dict(zip(state_names, tensors[n:])), tuple(tensors[:n]))

    from torch_mlir import fx  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            mlir_module = fx.export_and_import(_Functional().eval(), *dense_inputs, *map(_stand_in, values),
                                               output_type="linalg-on-tensors")
        except Exception as err:  # noqa: BLE001 - torch.export / torch-mlir failures are the user's model
            raise _export_failure(model_name, err, source) from None
    constants = {**dict(zip(state_names, values)), **(rewritten.constants if rewritten is not None else {})}
    return Traced(mlir_module, model_name, given_names, input_names + [_safe(n) for n in state_names],
                  [*example_inputs, *values], constants, dict(formats or {}))


TAKEN = ("write it with what fuseflow takes: matmuls (@, torch.sparse.mm, nn.Linear), elementwise ops, "
         "sum/max reductions, softmax, reshapes and concatenation")


def _export_failure(model_name: str, err, source: str | None) -> FuseflowError:
    """One line for a failed export: an exception the model's own code raised (its innermost
    frame in the model's file) is the user's, with its type, message and line; else the PyTorch
    op torch-mlir could not lower, if it names one."""
    text = str(err).strip()
    first = text.splitlines()[0].rstrip(":") if text else type(err).__name__
    frames = traceback.extract_tb(err.__traceback__)
    if source and frames and _same_file(frames[-1].filename, source):
        return UserError(f"{model_name}.forward raised {type(err).__name__}: {first}",
                         f"{frames[-1].filename}:{frames[-1].lineno}")
    op = re.search(r"\b(?:torch\.)?(aten\.[A-Za-z_][\w.]*)", text)
    if op:
        return NotSupported(f"PyTorch op {op[1].removesuffix('.default')} in {model_name}", "from_torch",
                            TAKEN)
    return NotSupported(f"exporting {model_name} with torch-mlir failed: {first}", "from_torch", TAKEN)


def _source_file(module) -> str | None:
    """The file that defines `module`'s class, if Python knows it."""
    try:
        return inspect.getsourcefile(type(module))
    except (TypeError, OSError):  # a built-in class, or one defined where there is no file
        return None


def _same_file(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def user_line(tb, path: str) -> str | None:
    """`FILE:LINE` of the innermost frame of traceback `tb` (or stack summary) that runs in `path`."""
    frames = tb if isinstance(tb, traceback.StackSummary) else traceback.extract_tb(tb)
    for frame in reversed(frames):
        if _same_file(frame.filename, path):
            return f"{frame.filename}:{frame.lineno}"
    return None


def _stand_in(x):
    """`x` itself if dense, else a zero-stride dense tensor of its shape and dtype."""
    import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

    return x if x.layout == torch.strided else torch.zeros((), dtype=x.dtype).expand(x.shape)


def _constant(value):
    """A parameter's data as a float64 numpy array, or a canonical scipy `csr_array` for a
    sparse matrix (from its CSR arrays: indices are shared, never densified)."""
    import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

    if value.layout == torch.strided:
        return value.to(torch.float64).numpy()
    if value.dim() != 2:
        return value.to_dense().to(torch.float64).numpy()
    if value.layout != torch.sparse_csr:
        value = value.to_sparse_csr()
    matrix = sp.csr_array((value.values().numpy().astype(np.float64), value.col_indices().numpy(),
                           value.crow_indices().numpy()), shape=tuple(value.shape))
    matrix.sum_duplicates()
    matrix.eliminate_zeros()
    return matrix


def _input_names(module, count: int) -> list[str]:
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [_safe(p.name) for p in params[:count]]
    return names + [f"arg{k}" for k in range(len(names), count)]
