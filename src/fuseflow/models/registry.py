"""Built-in models with their data and fusion presets: `build("gcn", dataset="karate")`.

    >>> case = build("gcn", dataset="karate")
    >>> sorted(case.presets), case.inputs["A"].shape
    (['full', 'layer1', 'layer2', 'partial', 'unfused'], (34, 34))
    >>> case.presets["layer1"]
    'fusion=[t2,t5,t6,t7][t8][t12][t13][t18_0,t19,t20,t23,t24] layout=induced'
"""
from __future__ import annotations

import gc
import inspect
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from ..data import list_datasets, load_graph
from ..errors import UserError
from ..frontend import from_torch
from ..ir.canonicalize import prepare
from ..ir.program import Program
from ..schedule.schedule import statement_groups
from .gcn import GCN
from .gpt3 import GPT3_DEEP, GPT3_MINI, GPT3_SMALL, GPT3_SMALL2, GPT3_TINY, GPT3_WIDE, GPT3BigBird, bigbird_mask
from .graphsage import GraphSAGE
from .presets import as_schedule, cross_layer, only_fused, reference_unfused
from .resolve import BLOCKED_MODELS
from .sae import BATCH, SAE_SIZES, SparseAutoencoder

MODELS = ("gcn", "graphsage", "sae", "gpt3-bigbird")
# gpt3.py's GPT3_* sizes, smallest first; small2: two decoders of small standing for its twelve
GPT3_CONFIGS = ("tiny", "mini", "wide", "deep", "small", "small2")
SAE_DATASETS = ("small", "imagenet", "nih-cxr", "luna16")  # sae.py's SAE_SIZES


@dataclass
class ModelCase:
    """A model ready to study: its canonical program (schedules name its ops), the input data,
    and its fusion presets (`unfused`, `partial`, `full`, ...) as schedule strings."""

    name: str
    dataset: str
    program: Program  # canonical (schedules name its ops)
    inputs: dict[str, np.ndarray]
    presets: dict[str, str] = field(default_factory=dict)
    note: str = ""
    layers: tuple[int, int] | None = None  # (decoders simulated, decoders of the model they stand for)


# graph models' weights: the reference generates them with 60% zeros and stores them compressed,
# input dimension first (F x 16), i.e. transposed from torch's (16 x F) Linear weight
WEIGHT_DENSITY = 0.4


def _graph_case(name: str, dataset, scale: float, seed: int, hidden: int, data_dir=None, budget=None,
                weight_density: float = WEIGHT_DENSITY) -> ModelCase:
    synthetic = str(dataset).startswith("synthetic:")
    graph = load_graph(dataset, scale=scale, seed=seed, budget=budget) if synthetic else \
        load_graph(dataset, data_dir=data_dir, budget=budget)
    features = np.asarray(graph.features, dtype=np.float64)
    torch.manual_seed(seed)
    cls = GCN if name == "gcn" else GraphSAGE
    model = cls(features=features.shape[1], classes=max(graph.num_classes, 2), hidden=hidden).eval()
    weights = {n: p for n, p in model.named_parameters() if p.dim() == 2}
    if weight_density < 1:
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in weights.values():
                p.mul_(torch.rand(p.shape, generator=generator) < weight_density)
    A = graph.adjacency.tocsr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        example_A = torch.sparse_csr_tensor(torch.tensor(A.indptr), torch.tensor(A.indices),
                                            torch.tensor(A.data, dtype=torch.float32), size=A.shape)
        program = prepare(from_torch(model, example_A, torch.tensor(features, dtype=torch.float32),
                                     formats={"A": "compressed,compressed",
                                              **({n: "compressed,compressed;order=1,0" for n in weights}
                                                 if weight_density < 1 else {})}))
    return ModelCase(name, graph.name, program, {"A": A, "X": features})


def _sae_case(size: str, seed: int, density: float) -> ModelCase:
    if size not in SAE_SIZES:
        raise UserError(f"unknown autoencoder size {size!r}", "--dataset", f"use one of {', '.join(SAE_SIZES)}")
    features, hidden = SAE_SIZES[size]
    model = SparseAutoencoder(features, hidden, density=density, seed=seed).eval()
    X = np.random.default_rng(seed).normal(size=(BATCH, features)) * 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = prepare(from_torch(model, torch.tensor(X, dtype=torch.float32),
                                     formats={"enc.weight": "compressed,compressed",
                                              "dec.weight": "compressed,compressed"}))
    del model
    gc.collect()  # the module (held in a reference cycle) goes now, not when the simulation needs its memory
    return ModelCase("sae", size, program, {"X": X})


def _gpt3_case(config: str, block: int, seed: int) -> ModelCase:
    configs = dict(zip(GPT3_CONFIGS, (GPT3_TINY, GPT3_MINI, GPT3_WIDE, GPT3_DEEP, GPT3_SMALL, GPT3_SMALL2)))
    cfg = configs.get(config)
    if cfg is None:
        raise UserError(f"unknown GPT-3 config {config!r}", "--dataset", f"use one of {', '.join(GPT3_CONFIGS)}")
    model = GPT3BigBird(**cfg, seed=seed).eval()
    if not isinstance(block, int) or block < 1 or cfg["seq"] % block:
        raise UserError(f"BigBird block {block} does not divide the sequence length {cfg['seq']}", "--block",
                        "use 16, 32 or 64")
    mask = bigbird_mask(cfg["seq"], block, seed=seed)
    x = np.random.default_rng(seed).normal(size=(cfg["seq"], cfg["d_model"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = prepare(from_torch(model, torch.tensor(x, dtype=torch.float32),
                                     torch.tensor(mask, dtype=torch.float32).to_sparse_csr(),
                                     formats={"M": "compressed,compressed"}))
    case = ModelCase("gpt3-bigbird", f"{config}-b{block}", program, {"x": x, "M": mask},
                     note=f"mask density {mask.mean():.3f}",
                     layers=(cfg["layers"], GPT3_SMALL["layers"]) if config == "small2" else None)
    lines, first = inspect.getsourcelines(GPT3BigBird.forward)
    line_of = {key: f"gpt3.py:{first + k}" for k, text in enumerate(lines)
               for key in ("block.qkv(", "block.tail(") if key in text}
    case.presets["full"] = as_schedule(cross_layer(program, line_of["block.tail("], line_of["block.qkv("]))
    return case


def datasets_of(name: str) -> list[str]:
    """What `build(name, dataset=...)` accepts by name (graph models also take files and URLs).

    >>> datasets_of("gpt3-bigbird")
    ['tiny', 'mini', 'wide', 'deep', 'small', 'small2']
    """
    if name in ("gcn", "graphsage"):
        return list_datasets()
    return list({"sae": SAE_DATASETS, "gpt3-bigbird": GPT3_CONFIGS}.get(name, ()))


def build(name: str, dataset=None, *, scale: float = 1.0, seed: int = 0, block: int = 16, tiled: bool = True,
          hidden: int = 16, density: float = 0.1, data_dir=None, budget=None) -> ModelCase:
    """A built-in model on a dataset (a `ModelCase`: `.program`, `.inputs`, `.presets`).

    - `name`: "gcn", "graphsage", "sae" or "gpt3-bigbird" (`fuseflow.MODELS`).
    - `dataset`: for gcn/graphsage a graph (default karate): a name of `list_datasets()`
      (karate, cora, citeseer, cora_ml, dblp, synthetic:cora, synthetic:mag, ...), a graph
      `.npz` path, `https://.../g.npz#sha256=HEX`, or a `fuseflow.data.Graph` (e.g. from
      `from_scipy`/`from_pyg`); for sae a size (small, imagenet, nih-cxr, luna16; default
      small); for gpt3-bigbird a config (tiny, mini, wide, deep, small, small2; default tiny).
    - `scale` (a float > 0): size factor of `synthetic:*` graphs; `seed` (an int >= 0): weights,
      synthetic graphs and sae's inputs; `hidden`: gcn/graphsage hidden width; `density`:
      share of sae's weights kept; `block`: gpt3-bigbird's BigBird block size, whose presets
      run blocked with tiles of it (its `<preset>-unblocked` presets run the same groups on
      scalar streams); `tiled=False` makes the scalar ones its presets (`unfused`, ... on scalar
      streams, the block only shaping the mask: how the reference's Figure 12 ran it).
    - `data_dir`, `budget`: as in `load_graph` (where to read or download graphs; a
      `fuseflow.Budget` bounding what loading may allocate).
    """
    if name in ("gcn", "graphsage"):
        case = _graph_case(name, "karate" if dataset is None else dataset, scale, seed, hidden, data_dir, budget)
    elif name == "sae":
        case = _sae_case(dataset or "small", seed, density)
    elif name == "gpt3-bigbird":
        case = _gpt3_case(dataset or "tiny", block, seed)
    else:
        raise UserError(f"unknown model {name!r}", "--model", f"built-in models: {', '.join(MODELS)}")
    case.presets.setdefault("unfused", as_schedule(reference_unfused(case.program)))
    case.presets.setdefault("partial", as_schedule(statement_groups(case.program)))
    case.presets.setdefault("full", "full layout=induced")
    if name in ("gcn", "graphsage"):  # one layer fused, the rest unfused (the reference's Figure 14)
        unfused = reference_unfused(case.program)
        for k, layer in enumerate(statement_groups(case.program), 1):
            case.presets[f"layer{k}"] = as_schedule(only_fused(unfused, layer))
    if name in BLOCKED_MODELS and tiled:
        scalar = dict(case.presets)
        case.presets = {k: f"{v} block={block}" for k, v in scalar.items()}
        case.presets.update({f"{k}-unblocked": v for k, v in scalar.items()})
    return case
