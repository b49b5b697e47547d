"""The oracle's execution context of one node (`_Ctx`): input cursors, step timing, buffered
emissions, counters, stored tensors, and `MisalignedStreams` for inputs that do not fit.

    >>> from fuseflow.sim.oracle import repeat
    >>> repeat("5 D", "S1 D")
    Traceback (most recent call last):
    ...
    fuseflow.sim.oracle.context.MisalignedStreams: n0 repeat: signal S1 needs S0 at the head of in: S1 vs 5
"""
from __future__ import annotations

from ...errors import UserError
from ...sam.graph import GraphError
from ...sam.primitives import PRIMITIVES
from ..hw import MEMORY_KINDS, HwConfig
from ..storage import Level, StoredTensor
from ..tiles import TileSpec
from ..tokens import Done, token_text


class MisalignedStreams(GraphError):
    """Token streams that do not fit a primitive: a bug in whatever built the graph."""


class _Chan:
    __slots__ = ("toks", "times", "pos", "name")

    def __init__(self, toks, times, name):
        self.toks, self.times, self.pos, self.name = toks, times, 0, name


class _Ctx:
    """Runs one node: input cursors, step timing, buffered emissions, counters."""

    def __init__(self, node_id, kind, params, arity, inputs: dict[str, _Chan], tensors, hw: HwConfig):
        self.id, self.kind, self.params, self.arity = node_id, kind, params, arity
        self.inputs, self.tensors = inputs, tensors
        self.lat, self.ii = hw.timing(kind, params)
        self.tile = TileSpec.of(kind, params)  # None unless the node's values are tiles
        self.hw = hw
        self._words = 0  # memory words issued so far (memory model)
        out_ports = PRIMITIVES[kind].ports(arity)[1]
        self.outs: dict[str, list] = {p: [] for p in out_ports}
        self.out_times: dict[str, list] = {p: [] for p in out_ports}
        self.t: int | None = None  # time of the last step
        self.steps = 0
        self._read_t = 0
        self._pending: list = []
        self._popped: list = []
        self.record = False  # keep what every step read, consumed and emitted (for bounded channels)
        self._peeked: set = set()
        self.log: list = []
        self.consumed: dict[str, list[int]] = {p: [] for p in inputs}  # step time of each input token
        self.counters = {"flops": 0, "mem_reads": 0, "mem_writes": 0}
        self.written_level: Level | None = None
        self.written_vals: list[float] | None = None

    # errors
    def where(self) -> str:
        return f"n{self.id} {self.kind}"

    def fail(self, msg: str, *toks) -> None:
        shown = " vs ".join(token_text(t) if t is not None else "<end>" for t in toks)
        raise MisalignedStreams(f"{self.where()}: {msg}" + (f": {shown}" if toks else ""))

    # reading and emitting
    def peek(self, port: str):
        ch = self.inputs.get(port)
        if ch is None:
            raise GraphError(f"{self.where()}: input port {port!r} is not connected")
        if ch.pos >= len(ch.toks):
            self.fail(f"input {port} ({ch.name}) ended without D")
        self._read_t = max(self._read_t, ch.times[ch.pos])
        if self.record:
            self._peeked.add((port, ch.pos))
        return ch.toks[ch.pos]

    def pop(self, port: str):
        tok = self.peek(port)
        self.inputs[port].pos += 1
        self._popped.append(port)
        return tok

    def emit(self, port: str, tok) -> None:
        self._pending.append((port, tok))

    def emit_all(self, tok) -> None:
        for port in self.outs:
            self._pending.append((port, tok))

    def step(self) -> None:
        t = self._read_t if self.t is None else max(self.t + self.ii, self._read_t)
        if self.hw.hbm and self.kind in MEMORY_KINDS:  # stall for the memory batches this step completes
            words = self.counters["mem_reads"] + self.counters["mem_writes"]
            t += self.hw.memory_stall(self._words, words - self._words)
            if self._pending and self._pending[-1][1] is Done:
                t += self.hw.final_stall(words)
            self._words = words
        if self.record:
            popped: dict[str, int] = {}
            for port in self._popped:
                popped[port] = popped.get(port, 0) + 1
            self.log.append((tuple(sorted(self._peeked)), tuple(popped.items()),
                             tuple((port, len(self.outs[port])) for port, _ in self._pending)))
            self._peeked = set()
        for port, tok in self._pending:
            self.outs[port].append(tok)
            self.out_times[port].append(t + self.lat)
        self._pending.clear()
        for port in self._popped:
            self.consumed[port].append(t)
        self._popped.clear()
        self._read_t = 0
        self.t = t
        self.steps += 1

    # tensors
    def tensor(self) -> StoredTensor:
        name = self.params.get("tensor")
        if name not in self.tensors:
            raise UserError(f"no stored tensor {name!r} for {self.where()}", None,
                            f"pass tensors[{name!r}] (a StoredTensor) to run_graph")
        return self.tensors[name]

    def level(self) -> Level:
        if not self.params.get("tensor") and self.params.get("format") == "dense":
            return Level("dense", self.params["dim"])  # the universe of a variable: no storage
        tensor, k = self.tensor(), self.params.get("level", 0)
        if not 0 <= k < len(tensor.levels):
            raise GraphError(f"{self.where()}: tensor {self.params['tensor']} has no level {k}")
        return tensor.levels[k]
