"""numba's on-disk cache of a kernel is keyed on what the kernel is compiled from (`sim.fast.kernel_cache`)."""
from fuseflow.sim.fast import core, kernel_cache, repeat  # noqa: F401  (repeat: a kernel module, imported)
from fuseflow.sim.fast.kernel_cache import dependency_digest

KERNELS = "fuseflow.sim.fast.repeat"


def test_a_constant_of_core_keys_the_kernels_that_read_it(monkeypatch):
    before = dependency_digest(KERNELS)
    assert dependency_digest(KERNELS) == before
    monkeypatch.setattr(core, "DONE", core.DONE + 100)
    assert dependency_digest(KERNELS) != before


def test_a_helper_of_core_keys_the_kernels_that_call_it(monkeypatch):
    before = dependency_digest(KERNELS)
    key = ("fuseflow.sim.fast.core", "missing")
    kernel_cache._source(core.missing.py_func)
    monkeypatch.setitem(kernel_cache._SOURCES, key, kernel_cache._SOURCES[key] + "# changed\n")
    assert dependency_digest(KERNELS) != before


def test_the_overloads_plain_functions_key_the_kernels(monkeypatch):
    before = dependency_digest(KERNELS)
    key = ("fuseflow.sim.fast.core", "_gated_by")
    kernel_cache._source(core._gated_by)
    monkeypatch.setitem(kernel_cache._SOURCES, key, kernel_cache._SOURCES[key] + "# changed\n")
    assert dependency_digest(KERNELS) != before
