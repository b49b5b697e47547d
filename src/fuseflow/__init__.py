"""fuseflow: fusion-centric compilation of sparse models onto streaming dataflow hardware.

    >>> import fuseflow
    >>> case = fuseflow.model("gcn", dataset="karate")       # program, inputs, fusion presets
    >>> result = fuseflow.simulate(case.program, case.presets["partial"], case.inputs)
    >>> result.verified, result.cycles > 0
    (True, True)
    >>> fuseflow.Schedule.parse("fusion=[t2,t5][t6] order.1=i,j").groups
    [['t2', 't5'], ['t6']]

Names are imported on first use, so `import fuseflow` stays quick.
"""
from __future__ import annotations

import importlib

from .errors import FuseflowError as FuseflowError
from .errors import NotSupported as NotSupported
from .errors import UserError as UserError

__version__ = "0.1.0"

# public name -> module that defines it (relative to this package)
_HOMES = {
    "from_mlir": ".frontend", "from_torch": ".frontend",
    "compile": ".api", "simulate": ".api", "study": ".api", "tune": ".api", "TuneResult": ".tuner.result",
    "Schedule": ".schedule", "HwConfig": ".sim.hw", "Budget": ".memory", "MemoryLimitError": ".memory",
    "Program": ".ir", "TensorFormat": ".ir", "reference": ".ir", "verify": ".ir",
    "random_inputs": ".ir.generate", "estimate": ".fusion.estimate",
    "SimResult": ".pipeline", "Compiled": ".fusion.compile", "StudyResult": ".studies.granularity",
    "ModelCase": ".models.registry", "MODELS": ".models.registry",
    "load_graph": ".data", "list_datasets": ".data", "from_scipy": ".data", "from_pyg": ".data", "Graph": ".data",
    "to_frame": ".tables", "to_csv": ".tables",
}
_RENAMED = {"model": (".models.registry", "build")}

__all__ = sorted(["FuseflowError", "NotSupported", "UserError", "__version__", *_HOMES, *_RENAMED])


def __getattr__(name: str):
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name], __name__), name)
    elif name in _RENAMED:
        module, attr = _RENAMED[name]
        value = getattr(importlib.import_module(module, __name__), attr)
    else:
        raise AttributeError(f"module 'fuseflow' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
