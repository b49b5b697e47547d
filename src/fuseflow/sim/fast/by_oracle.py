"""A node the kernels do not handle (an unusual parameter, an input of an unexpected type, a
hardware model whose timing functions are overridden) runs on the oracle inside the streaming
engine: it waits until every input stream is complete, runs the oracle's implementation on the
whole token lists, then hands its outputs to the channels. Exact, and as large in memory as its
streams: the engine grows the buffers it waits on.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> format_tokens(apply("alu", {"a": "1 2 S0 D"}, {"op": "neg", "scalar_pos": 0}).outs["val"])
    '-1 -2 S0 D'
"""
from __future__ import annotations

import numpy as np

from ...sam.primitives import ANY, PAYLOAD, PRIMITIVES
from ..oracle.node import _run_node
from .core import DONE, FLOPS, PORT, READS, STEPS, WAIT_IN, WRITES, Runner, T
from .stream import VAL, from_tokens, token_list

_INT_KINDS = ("crd", "ref", "repsig")


class OracleRunner(Runner):
    """Runs one node on the oracle once its inputs are complete."""

    def __init__(self, node, tensors, hw, cache):
        super().__init__(node, tensors, hw, cache)
        ins, outs = PRIMITIVES[node.kind].ports(node.arity)
        self.ins = tuple(p for p in ins if p in node.inputs) + tuple(p for p in node.inputs if p not in ins)
        self.outs = tuple(outs)
        self._kinds = outs
        self.left: dict = {}

    def _source(self, port: str):
        """The input whose stream an output passes on (payloads, broadcast, fork, join's first lane)."""
        if port.startswith("pay") and port in self.ins:
            return self.in_ch[self.ins.index(port)]
        return self.in_ch[0] if self.in_ch else None

    def out_dtype(self, port):
        kind = self._kinds[port]
        if kind in _INT_KINDS:
            return np.int64
        if kind in (PAYLOAD, ANY) and self._source(port) is not None:
            if self.kind == "join":  # lanes of ints and floats give floats
                return np.result_type(*[ch.dtype for ch in self.in_ch])
            return self._source(port).dtype
        return np.float64

    def out_tile(self, port):
        kind = self._kinds[port]
        if kind == "val" and self.tile is not None:
            return self.tile.shape(self.tile.out)
        if kind in (PAYLOAD, ANY) and self._source(port) is not None:
            return self._source(port).tile_shape
        return None

    def call(self) -> int:
        for q, ch in enumerate(self.in_ch):
            if not ch.final:
                self.S[PORT] = q
                return WAIT_IN
        inputs, names = {}, {}
        for port, ch in zip(self.ins, self.in_ch):
            n = ch.count
            inputs[port] = (_tokens(ch, 0, n), (ch.sent[:n] + ch.lat).tolist())
            names[port] = f"n{self.node.inputs[port].node}.{self.node.inputs[port].port}"
        run = _run_node(self.id, self.kind, self.params, self.arity, inputs, self.tensors, self.hw, names)
        for (port, ch), x in zip(zip(self.ins, self.in_ch), self.readers):
            got = np.asarray(run.consumed[port], dtype=np.int64)
            self.cons_of(ch, x)[:got.shape[0]] = got
            self.engine.tables.RD[x, 0] = ch.base + got.shape[0]
        for port, ch in zip(self.outs, self.out_ch):
            arr = from_tokens(run.outs[port], run.times[port], dtype=ch.dtype, lat=self.lat)
            tiles = None
            if ch.tile_shape is not None:
                tiles = np.zeros((len(arr),) + ch.tile_shape)
                vals = np.nonzero(arr.kind == VAL)[0]
                if arr.tiles is not None and vals.shape[0]:
                    tiles[vals] = arr.tiles[arr.data[vals].astype(np.int64)]
                arr.data[vals] = ch.produced + vals
            if ch.capacity - ch.count < len(arr):
                self.engine._grow_channel(ch, self, ch.count + len(arr))
            ch.append(arr.kind, arr.data, arr.sent, tiles)
        self.S[STEPS] = run.steps
        self.S[T] = run.last_step if run.last_step is not None else self.S[T]
        self.S[FLOPS] = run.counters["flops"]
        self.S[READS] = run.counters["mem_reads"]
        self.S[WRITES] = run.counters["mem_writes"]
        self.left = {"level": run.written_level, "vals": run.written_vals}
        return DONE

    def counters(self) -> dict:
        return {"flops": int(self.S[FLOPS]), "mem_reads": int(self.S[READS]), "mem_writes": int(self.S[WRITES])}

    def finish(self) -> dict:
        return self.left


def _tokens(ch, start: int, end: int) -> list:
    """The oracle's tokens of window positions start..end-1."""
    return token_list(ch.kind[start:end], ch.data[start:end],
                      None if ch.tile_shape is None else ch.tiles[start:end])
