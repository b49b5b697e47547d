"""What every per-node driver of the fast engine shares: the node it runs (`_Node`), what it
returns (`_Res`), the way back to the oracle (`_NeedOracle`, `_check`) and the memory model.

Kernel conventions: an input X arrives as (X kind, X data, X sent, X lat); a token is visible at
sent + lat. A kernel returns err first (0: fine; otherwise the oracle must look at the node),
then how far it read each input, then its outputs as sent times (step times). `cons` arrays
hold the step time at which each input token was consumed; where a node consumes one input
token per step and emits one token per step, the output's sent times *are* those times.

    >>> _counters(flops=2)
    {'flops': 2, 'mem_reads': 0, 'mem_writes': 0}
    >>> _check(0, (3, 3))
    >>> _check(0, (2, 3))
    Traceback (most recent call last):
    ...
    fuseflow.sim.fast_core._NeedOracle
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .fast_stream import STOP, Arr
from .hw import MEMORY_KINDS, HwConfig
from .oracle_arith import NAN
from .oracle_ctx import _Ctx
from .tiles import TileSpec

_INF = math.inf
# The oracle's NaN constant, passed to kernels in an array: a NaN literal would let LLVM fold
# `x >= 0 ? sqrt(x) : NaN` into `sqrt(x)`, whose NaN has another sign bit.
_NAN = np.array([NAN], dtype=np.float64)
_NO_MEM = np.zeros(4, dtype=np.int64)  # memory model off


@njit(cache=True)
def _stall(mem, before, words, done):
    """HwConfig.memory_stall (+ final_stall on a step emitting D) of a memory node's step;
    mem = (hbm, channels, latency, startup)."""
    if mem[0] == 0:
        return 0
    extra = 0
    if words > 0:
        c = mem[1]
        extra = ((before + words) // c - before // c) * mem[2]
        if before == 0:
            extra += mem[3]
    if done and (before + words) % mem[1] != 0:
        extra += mem[2]
    return extra


class _NeedOracle(Exception):
    """The node is outside what the kernels handle (or its inputs are malformed): ask the oracle."""

    def __init__(self, strict: bool):
        super().__init__()
        self.strict = strict  # True: a kernel found malformed input, so the oracle must fail too


class _Res:
    __slots__ = ("outs", "steps", "last", "counters", "cons", "level", "vals")

    def __init__(self, outs, steps, last, counters, cons, level=None, vals=None):
        self.outs, self.steps, self.last, self.counters = outs, steps, last, counters
        self.cons, self.level, self.vals = cons, level, vals


def _counters(flops=0, reads=0, writes=0):
    return {"flops": int(flops), "mem_reads": int(reads), "mem_writes": int(writes)}


def _check(err, *pairs):
    """Raise _NeedOracle unless err == 0 and every input (consumed count, length) was used up."""
    if err:
        raise _NeedOracle(True)
    for used, n in pairs:
        if used != n:
            raise _NeedOracle(True)


def _ints(*arrs):
    for a in arrs:
        if a.data.dtype != np.int64:
            raise _NeedOracle(False)


def _stop_levels(a: Arr) -> np.ndarray:
    """int64 data of a stream: the stop levels (Val data of a float stream is dropped)."""
    if a.data.dtype == np.int64:
        return a.data
    return np.where(a.kind == STOP, a.data, 0).astype(np.int64)


class _Node:
    """What a per-node driver gets: the node, its input streams, tensors and timing."""

    __slots__ = ("id", "kind", "params", "arity", "ins", "tensors", "hw", "lat", "ii", "cache", "tile")

    def __init__(self, node_id, kind, params, arity, ins, tensors, hw, cache):
        self.id, self.kind, self.params, self.arity, self.ins = node_id, kind, params, arity, ins
        self.tensors, self.hw, self.cache = tensors, hw, cache
        self.tile = TileSpec.of(kind, params)
        lat, ii = hw.timing(kind, params)
        self.lat, self.ii = int(lat), int(ii)

    def ctx(self):
        """An oracle context (no inputs) to evaluate parameters exactly as the oracle does."""
        return _Ctx(self.id, self.kind, self.params, self.arity, {}, self.tensors, self.hw)

    def mem(self) -> np.ndarray:
        """(hbm, channels, latency, startup) of the memory model for this node's kind."""
        hw = self.hw
        if not getattr(hw, "hbm", False) or self.kind not in MEMORY_KINDS:
            return _NO_MEM
        values = (hw.hbm_channels, hw.hbm_latency, hw.hbm_startup)
        if (not all(isinstance(v, int) for v in values) or hw.hbm_channels <= 0
                or type(hw).memory_stall is not HwConfig.memory_stall
                or type(hw).final_stall is not HwConfig.final_stall):
            raise _NeedOracle(False)
        return np.array((1,) + values, dtype=np.int64)

    def inp(self, port) -> Arr:
        if port not in self.ins:
            raise _NeedOracle(False)
        return self.ins[port]

    def only(self, *ports):
        if set(self.ins) != set(ports):
            raise _NeedOracle(False)
        return [self.ins[p] for p in ports]

    def array(self, values, dtype):
        """`values` (a list or array of a stored tensor) as a numpy array, converted once per run."""
        key = (id(values), dtype)
        hit = self.cache.get(key)
        if hit is None or hit[0] is not values:
            hit = (values, np.asarray(values, dtype=dtype))
            self.cache[key] = hit
        return hit[1]

    def out(self, kind, data, sent, tiles=None) -> Arr:
        return Arr(kind, data, sent, self.lat, tiles)
