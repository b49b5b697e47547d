"""Load a PyTorch model class from a file for the CLI, with generated example inputs.

    >>> parse_input_spec("34x34:csr")
    ((34, 34), 'csr')
"""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

from ..errors import UserError
from .torch_import import from_torch

LAYOUTS = ("dense", "csr", "csc", "coo")


def parse_input_spec(text: str) -> tuple[tuple[int, ...], str]:
    shape_text, _, layout = text.partition(":")
    layout = layout or "dense"
    if not re.fullmatch(r"\d+(x\d+)*", shape_text):
        raise UserError(f"input spec {text!r} has no shape like 34x16", "--input",
                        "write SHAPE[:LAYOUT], e.g. 34x34:csr")
    if layout not in LAYOUTS and not re.fullmatch(r"bsr\d+", layout):
        raise UserError(f"unknown layout {layout!r} in {text!r}", "--input",
                        "use dense, csr, csc, coo or bsrB (B = block size)")
    return tuple(int(d) for d in shape_text.split("x")), layout


def make_input(shape, layout: str, density: float, generator):
    import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

    if layout == "dense":
        return torch.randn(shape, generator=generator)
    mask = torch.rand(shape, generator=generator) < density
    dense = torch.randn(shape, generator=generator) * mask
    if layout == "csr":
        return dense.to_sparse_csr()
    if layout == "csc":
        return dense.to_sparse_csc()
    if layout == "coo":
        return dense.to_sparse_coo()
    block = int(layout[3:])
    if len(shape) != 2 or shape[0] % block or shape[1] % block:
        raise UserError(f"shape {shape} is not a 2-d multiple of block {block}", "--input")
    return dense.to_sparse_bsr((block, block))


def load_class(spec: str):
    path_text, sep, class_name = spec.rpartition(":")
    if not sep or not path_text or not class_name:
        raise UserError(f"--torch {spec!r} is not FILE.py:CLASS", "command line")
    path = Path(path_text)
    if not path.is_file():
        raise UserError(f"no such Python file: {path}", "--torch")
    module_spec = importlib.util.spec_from_file_location(f"fuseflow_user_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - whatever the user's file raises on import
        raise UserError(f"importing {path} failed: {type(err).__name__}: {err}", str(path)) from None
    if not hasattr(module, class_name):
        raise UserError(f"{path} defines no {class_name}", str(path))
    return module, getattr(module, class_name)


def program_from_torch_spec(spec: str, inputs: list[str] | None, init: str | None, density: float,
                            seed: int, formats: dict):
    import torch  # noqa: PLC0415 - torch is slow to import; only PyTorch models need it

    module, cls = load_class(spec)
    try:
        kwargs = json.loads(init) if init else {}
    except json.JSONDecodeError as err:
        raise UserError(f"--init is not JSON: {err}", "command line") from None
    if not isinstance(kwargs, dict):
        raise UserError("--init must be a JSON object of constructor arguments", "command line")
    torch.manual_seed(seed)
    try:
        model = cls(**kwargs)
    except TypeError as err:
        raise UserError(f"constructing {cls.__name__} failed: {err}", spec, "pass arguments with --init") from None
    generator = torch.Generator().manual_seed(seed)
    if inputs:
        examples = [make_input(*parse_input_spec(text), density, generator) for text in inputs]
    elif hasattr(module, "example_inputs"):
        examples = list(module.example_inputs())
    else:
        raise UserError(f"no example inputs for {cls.__name__}", spec,
                        "give --input SHAPE[:LAYOUT] per forward() argument or define example_inputs()")
    return from_torch(model, *examples, formats=formats)
