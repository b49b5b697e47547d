"""numba's on-disk cache of the fast engine's functions, keyed on everything they are compiled from.

numba keys a cached function on its own file's content only, but a kernel has compiled into it the
numba helpers it calls from other modules (`core.gated`, `stream._is_elem`, ...) and the values
of the global constants it reads (op codes taken from `scalar_ops`). Without more, a change to a
helper in `core` would leave every warm cache running the kernels built with the old helper. For
a function defined in `sim/fast`, the key here also holds, transitively, the source of every numba
function that its module's globals name from another module or hold in a module of `sim/fast` that
they name (a kernel calls `core.gated`, compares with `core.DONE`), and the values of the numeric
globals of its module and of those modules. Importing this module puts its locators ahead of
numba's own (`fast/__init__` imports it before any kernel module); only names bound before a
function is defined count, which holds for imports and the constants at the top of a module.

numba's own save reads a function's index, picks the first free data file name, writes the index
and then the data, unlocked: two processes compiling signatures of one function at once (the
warm-up's background half beside a command, a sharded run's workers) could give two signatures one
data file. Here a save holds a lock beside the index and writes the data before the index names it.

    >>> from fuseflow.sim.fast import repeat
    >>> type(repeat._k_repsig._cache._impl.locator).__name__, type(repeat._k_repsig._cache._cache_file).__name__
    ('InTreeLocator', 'LockedCacheFile')
"""
from __future__ import annotations

import fcntl
import hashlib
import inspect
import itertools
import os
import sys
import types

from numba.core import caching
from numba.core.caching import CacheImpl, IndexDataCacheFile, InTreeCacheLocator, UserProvidedCacheLocator
from numba.core.dispatcher import Dispatcher

HERE = os.path.dirname(os.path.abspath(__file__))


PACKAGE = __name__.rpartition(".")[0]


def _dependencies(module_name: str) -> tuple[list, list]:
    """The numba functions that module `module_name`'s globals name (its own and imported ones),
    with the plain functions compiled into kernels through an overload (marked `kernel_source`),
    and the names of the modules of this package that they name (`core`)."""
    module = sys.modules.get(module_name)
    if module is None:
        return [], []
    found = vars(module).values()
    return ([v for v in found if isinstance(v, Dispatcher) or getattr(v, "kernel_source", False)],
            [v.__name__ for v in found if isinstance(v, types.ModuleType) and v.__name__.startswith(PACKAGE + ".")])


def _numbers(module_name: str) -> bytes:
    """Module `module_name`'s numeric globals (numba freezes them into what it compiles)."""
    module = sys.modules.get(module_name)
    numbers = [] if module is None else sorted(
        (k, repr(v)) for k, v in vars(module).items() if isinstance(v, (bool, int, float)))
    return repr(numbers).encode()


_SOURCES: dict = {}  # (module, qualified name) -> the source of a numba function, read once


def _source(fn) -> str:
    """The source of `fn`, a plain function (a numba function's `py_func`)."""
    key = (fn.__module__, fn.__qualname__)
    if key not in _SOURCES:
        _SOURCES[key] = inspect.getsource(fn)
    return _SOURCES[key]


def dependency_digest(module_name: str) -> bytes:
    """A digest of the sources of the numba functions reachable from module `module_name` through
    globals, those of the module itself left out (numba hashes its file), and of the numeric globals
    of the module and of the modules of this package that it names."""
    digest = hashlib.sha256()
    digest.update(_numbers(module_name))
    seen, todo = {module_name}, [module_name]
    while todo:
        functions, modules = _dependencies(todo.pop())
        for name in modules:
            if name not in seen:
                seen.add(name)
                todo.append(name)
                digest.update(name.encode() + _numbers(name))
        for fn in functions:
            py_func = getattr(fn, "py_func", fn)
            name = py_func.__module__
            if name == module_name:
                continue
            digest.update(f"{name}.{py_func.__qualname__}".encode())
            digest.update(_source(py_func).encode())
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return digest.digest()


class _WithDependencies:
    """A locator mixin: engine functions' source stamp also covers their dependencies."""

    @classmethod
    def from_function(cls, py_func, py_file):
        if os.path.dirname(os.path.abspath(py_file)) != HERE:
            return None
        return super().from_function(py_func, py_file)

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        self._dependencies = dependency_digest(py_func.__module__)

    def get_source_stamp(self):
        return super().get_source_stamp(), self._dependencies


class InTreeLocator(_WithDependencies, InTreeCacheLocator):
    """numba's `__pycache__` beside the source."""


class UserDirLocator(_WithDependencies, UserProvidedCacheLocator):
    """numba's cache under NUMBA_CACHE_DIR."""


class LockedCacheFile(IndexDataCacheFile):
    """A function's index and data files, saved by one process at a time, the data first."""

    def save(self, key, data):
        with open(self._index_path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            overloads = self._load_index()
            name = overloads.get(key)
            if name is None:
                taken = set(overloads.values())
                name = next(n for n in map(self._data_name, itertools.count(1)) if n not in taken)
            self._save_data(name, data)
            if overloads.get(key) != name:
                overloads[key] = name
                self._save_index(overloads)


def install() -> None:
    """Put the engine's locators first in numba's list and its cache files locked (once)."""
    classes = CacheImpl._locator_classes
    if InTreeLocator not in classes:
        classes[:0] = [UserDirLocator, InTreeLocator]
    caching.IndexDataCacheFile = LockedCacheFile  # what numba's Cache builds for a function


install()
