"""Memory as a resource: how much there is, limits users give, and estimates checked against them.

Every place that is about to allocate something large (the simulator before a kernel, loaders
before decoding a file, planners before building a table) asks a `Budget` first, so that a
request that cannot fit ends in one line naming what and how much, never in the operating
system killing the process.

    >>> parse_size("1.5G"), parse_size("512M"), parse_size("4096")
    (1610612736, 536870912, 4096)
    >>> Budget(parse_size("64G")).check(2**20, "kernel k0")
    >>> Budget(parse_size("1M")).check(3 * 2**20, "kernel k0 (fully fused)")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    fuseflow.memory.MemoryLimitError: kernel k0 (fully fused): needs about 3.0 MiB more, ... (fix: raise --max-memory, ...)
    >>> format_bytes(3 * 2**30)
    '3.0 GiB'
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import resource

import psutil

from .errors import UserError

__all__ = ["Budget", "MemoryLimitError", "available_bytes", "format_bytes", "parse_size", "register_cache",
           "resident_bytes"]

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(?:i?B)?", re.ASCII | re.IGNORECASE)
# what is left for the rest of the process (interpreter, libraries, result arrays) when the
# limit is the machine's available memory rather than one the user gave
_HEADROOM = 0.8


class MemoryLimitError(UserError):
    """A request estimated to need more memory than is available or allowed."""


def parse_size(text: str | int | float) -> int:
    """Bytes of a size such as `4G`, `512M`, `1.5GiB` or a plain number of bytes."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text <= 0 or text != text or text == float("inf"):
            raise UserError(f"memory size {text!r} must be a positive number of bytes")
        return int(text)
    match = _SIZE.fullmatch(str(text).strip())
    if not match or float(match.group(1)) <= 0:
        raise UserError(f"cannot read memory size {text!r}", fix="write it like 4G, 512M or 1048576")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def format_bytes(n: float) -> str:
    """`n` bytes in the largest binary unit that keeps one digit before the point."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _cgroup_left() -> int | None:
    """Bytes left under this process's cgroup (v2) memory limit, if it has one."""
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as f:
            return int(limit) - int(f.read().strip())
    except (OSError, ValueError):
        return None


def available_bytes() -> int:
    """Memory this process can still take: the machine's available memory, lowered by a cgroup
    limit or an address-space limit (`ulimit -v`, `prlimit --as`) where one is set."""
    left = [psutil.virtual_memory().available]
    cgroup = _cgroup_left()
    if cgroup is not None:
        left.append(cgroup)
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        left.append(soft - psutil.Process(os.getpid()).memory_info().vms)
    return max(0, min(left))


def _libc():
    """The C library when it is glibc (it has malloc_trim), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _libc()


def release_freed() -> None:
    """Hand memory freed by numpy and numba back to the operating system. glibc keeps freed
    blocks below its (growing) mmap threshold in its heap, so a run's resident size would
    otherwise keep the high-water mark of every kernel before it; a no-op elsewhere.

    >>> release_freed()
    """
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


_CACHES: list = []


def register_cache(free) -> None:
    """`free()` empties a cache of memory kept for reuse (the fast engine's buffer pool); a
    budget check that would fail calls it first."""
    _CACHES.append(free)


def resident_bytes() -> int:
    """This process's resident memory now."""
    return psutil.Process(os.getpid()).memory_info().rss


class Budget:
    """A memory limit for this process: `limit` bytes in all (the process's resident memory
    counts against it), or (None) a share of the memory available when each check is made."""

    def __init__(self, limit: int | str | None = None):
        self.limit = None if limit is None else parse_size(limit)

    def allowed(self) -> int:
        """Bytes the process may still take."""
        if self.limit is not None:
            return max(0, self.limit - resident_bytes())
        return int(available_bytes() * _HEADROOM)

    def fits(self, nbytes: float) -> bool:
        return nbytes <= self.allowed()

    def check(self, nbytes: float, what: str) -> None:
        """Raise `MemoryLimitError` naming `what` if `nbytes` more do not fit (after emptying
        the caches of memory kept for reuse, see `register_cache`)."""
        allowed = self.allowed()
        if nbytes > allowed and _CACHES:
            for free in _CACHES:
                free()
            release_freed()
            allowed = self.allowed()
        if nbytes > allowed:
            if self.limit is not None:
                raise MemoryLimitError(
                    f"needs about {format_bytes(nbytes)} more, and the limit of {format_bytes(self.limit)} "
                    f"leaves {format_bytes(allowed)}", what,
                    "raise --max-memory, or choose a smaller input or a schedule that materialises less")
            raise MemoryLimitError(f"needs about {format_bytes(nbytes)} more, and {format_bytes(allowed)} "
                                   "are available", what,
                                   "choose a smaller input or a schedule that materialises less")

    def __repr__(self) -> str:
        return f"Budget({'available' if self.limit is None else format_bytes(self.limit)})"
