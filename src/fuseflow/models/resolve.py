"""How a model is named, with the same rules everywhere: every command, sweep and suite turns the
text that names its model into a `ModelRef` here before loading it.

A model is an `.mlir` file, a PyTorch class `FILE.py:Class`, or a built-in model (`model:gcn`, or
a built-in name alone). This module imports no model (torch is slow to import): it decides what
kind of thing a text names, and says clearly when it names nothing.

    >>> resolve("tests/mlir/spmv.mlir"), resolve("net.py:Net").kind, resolve("model:gcn").key
    (ModelRef(kind='mlir', name='tests/mlir/spmv.mlir'), 'torch', 'model:gcn')
    >>> resolve("gcn").key
    'model:gcn'
    >>> resolve("gnc", "--model")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    fuseflow.errors.UserError: --model: unknown model 'gnc' (fix: built-in models: gcn, graphsage, ...)
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..errors import UserError

TORCH_SPEC = re.compile(r".+\.py:[A-Za-z_][A-Za-z0-9_]*")
# what --dataset takes per built-in model, for help texts (naming one needs no model import;
# tests check these against models.registry)
BUILT_IN = {"gcn": "graph", "graphsage": "graph", "sae": ("small", "imagenet", "nih-cxr", "luna16"),
            "gpt3-bigbird": ("tiny", "mini", "wide", "deep", "small", "small2")}
GRAPH_DATASETS = "karate, cora, citeseer, cora_ml, dblp, synthetic:{cora,cora_ml,dblp,collab,mag,...}, a graph .npz"
KINDS = ("mlir", "torch", "model")
BLOCKED_MODELS = ("gpt3-bigbird",)  # presets run blocked (block=B, tiles of the BigBird block size)


@dataclass(frozen=True)
class ModelRef:
    """What a text names: `kind` mlir (`name` the file), torch (`name` FILE.py:Class) or model
    (`name` the built-in model's)."""

    kind: str
    name: str

    @property
    def key(self) -> str:
        """The text that names it again (`model:NAME` for a built-in model)."""
        return f"model:{self.name}" if self.kind == "model" else self.name


def resolve(text: str, flag: str = "MODEL") -> ModelRef:
    """The model `text` names: `model:NAME` a built-in model; `FILE.py:Class` (no such file
    `FILE.py:Class` existing) a PyTorch class; an existing path or a name ending in `.mlir` an MLIR
    file; a built-in model's name alone that model. Anything else is refused in one line (an
    unknown model where `flag` is `--model`, else a missing file)."""
    text = str(text).strip()
    if not text:
        raise UserError("an empty model name", flag, "give an .mlir file, FILE.py:Class or model:NAME")
    if text.startswith("model:"):
        return ModelRef("model", text[len("model:"):])
    if TORCH_SPEC.fullmatch(text) and not os.path.exists(text):
        return ModelRef("torch", text)
    if os.path.exists(text) or text.endswith(".mlir"):
        return ModelRef("mlir", text)
    if text in BUILT_IN:
        return ModelRef("model", text)
    if flag == "--model" and "/" not in text and "." not in text:
        built_in(text, flag, "; or an .mlir file or FILE.py:Class")
    raise UserError(f"no such file {text!r}", flag,
                    f"give an .mlir file, FILE.py:Class or model:NAME (built in: {', '.join(BUILT_IN)})")


def built_in(name, where: str, alternatives: str = "") -> ModelRef:
    """A built-in model named by its name alone (as suites name theirs), or a one-line refusal.

        >>> built_in("gcn", "suite").key
        'model:gcn'
    """
    if name not in BUILT_IN:
        raise UserError(f"unknown model {name!r}", where, f"built-in models: {', '.join(BUILT_IN)}{alternatives}")
    return ModelRef("model", name)
