"""Channel buffers a finished run hands back for the next run to reuse.

A fresh array costs a page fault on each 4 KB page it first touches, and on a virtual machine a
fault can cost several microseconds: a run of a few million tokens touched 60 MB of fresh
buffers and spent more time faulting than simulating. Runs of one study or sweep use buffers of
the same few sizes (powers of two), so the engine takes its buffers from here and gives them back
when a run ends (or a buffer grows). The pool keeps at most POOL_BYTES; what does not fit is freed
as before, and a memory check that would fail empties the pool first (`memory.register_cache`).
Reused buffers hold whatever the last run left: the engine never reads a slot before writing it
(`POISON` fills given-back buffers with garbage; the tests turn it on).

    >>> a = take(1024, np.int64)
    >>> give(a)
    >>> take(1024, np.int64) is a, take(1024, np.int64) is a
    (True, False)
    >>> clear(); pooled_bytes()
    0
"""
from __future__ import annotations

import threading

import numpy as np

from ...memory import register_cache

POOL_BYTES = 256 << 20
POISON = False  # fill buffers with garbage when they are given back (tests: nothing reads stale slots)

_free: dict[tuple[str, int], list[np.ndarray]] = {}
_bytes = 0
_lock = threading.Lock()  # engines may run in threads of one process (a dask worker's)


def take(n: int, dtype) -> np.ndarray:
    """A one-dimensional array of `n` items of `dtype`: a pooled one if there is one, else new."""
    global _bytes
    dtype = np.dtype(dtype)
    with _lock:
        stack = _free.get((dtype.str, n))
        if stack:
            arr = stack.pop()
            _bytes -= arr.nbytes
            return arr
    return np.empty(n, dtype=dtype)


def give(*arrays: np.ndarray) -> None:
    """Hand arrays back (the caller no longer uses them); those beyond POOL_BYTES are freed."""
    global _bytes
    if POISON:
        for arr in arrays:
            if arr.ndim == 1 and arr.flags.owndata:
                arr.view(np.uint8).fill(0xA5)
    with _lock:
        for arr in arrays:
            n = arr.nbytes
            if n and arr.ndim == 1 and arr.flags.owndata and _bytes + n <= POOL_BYTES:
                _free.setdefault((arr.dtype.str, arr.shape[0]), []).append(arr)
                _bytes += n


def clear() -> None:
    """Free every pooled buffer."""
    global _bytes
    with _lock:
        _free.clear()
        _bytes = 0


def pooled_bytes() -> int:
    return _bytes


register_cache(clear)  # a memory check about to fail frees the pool first


__all__ = ["POOL_BYTES", "take", "give", "clear", "pooled_bytes"]
