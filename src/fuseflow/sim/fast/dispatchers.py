"""The fast engine's numba functions as a list, and loading every signature numba's on-disk cache
holds for them (what the resident worker does once, so that the commands it runs load none).

    >>> "_k_copy" in {d.py_func.__name__ for d in kernel_dispatchers()}
    True
"""
from __future__ import annotations

import importlib
import pkgutil
import sys

from numba.core.registry import CPUDispatcher


def kernel_dispatchers() -> list[CPUDispatcher]:
    """The numba functions defined in `fuseflow.sim.fast`'s modules."""
    package = sys.modules[__package__]
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{__package__}.{info.name}")
        found += [obj for obj in vars(module).values()
                  if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == module.__name__]
    return found


def load_cached(dispatcher: CPUDispatcher) -> int:
    """Load every signature of `dispatcher` that numba's cache holds for its current source and
    this machine (index entries of an older source or another CPU are skipped, so nothing is
    compiled); signatures loaded."""
    cache = dispatcher._cache
    if not hasattr(cache, "_cache_file"):  # a function numba does not cache (cache=False)
        return 0
    codegen = dispatcher.targetctx.codegen()
    loaded = 0
    for key in cache._cache_file._load_index():
        signature = key[0]
        if key[1:] != cache._index_key(signature, codegen)[1:] or tuple(signature) in dispatcher.overloads:
            continue
        dispatcher.compile(signature)
        loaded += 1
    return loaded
