"""The oracle simulator: a plain per-token implementation of every SAM primitive with a cycle model.

This is the reference that faster engines must match token for token, step for step and cycle for
cycle, so every primitive is written as a simple loop of *steps*. In each step a node reads (peeks
at or consumes) some input heads and emits zero or more tokens.

Cycle model (unbounded channels). Step `s` of a node happens at
`t_s = max(t_{s-1} + II, visible time of every input token the step reads)` (with `t_{-1}` taken
so that `t_0 = max(0, ...)`); a token emitted at step time `t` becomes visible to its consumers at
`t + latency(kind)` (see `HwConfig`). Since the graph is a DAG and channels are unbounded, nodes
run one after another in id order, each producing its whole output token lists with visible
times. `GraphRun.cycles` is the latest step time at which a writer (level_write or value_write)
consumes `D` (0 if the graph has no writer).

Steps of each primitive ("reads" = the heads whose visible times count for the step):

* root: 2 steps: emit `0`; emit `D`.
* scan: one step per emitted token (crd and ref are emitted together). For a `Val(r)` fiber with
  m coordinates: m+1 steps, the first consumes `r` and emits the first coordinate (or `S0` if
  m = 0), the last emits `S0`; the steps after the first read nothing. `N` on a dense level is
  the full fiber with `N` positions (dim+1 steps), on a compressed level one step emitting `S0`.
  `Sn`, `D`: one step consuming it and emitting `S(n+1)`, `D`.
* locate, alu: one step per aligned input tuple, consuming one token of every input.
* repsig, array, broadcast, fork, level_write, value_write: one step per input token.
* repeat: one step per signal token: consumes it, reads the head of `in` (consuming it on `Sn`/`D`).
* intersect, union: one step per loop iteration; it reads every crd head and consumes the
  payload heads of the inputs it advances. Intersect: all heads `D` -> consume all, emit `D`;
  all heads the same `Sn` -> consume all, emit `Sn`; all heads equal coordinates -> consume all,
  emit the coordinate and the payloads; some head a stop -> skip (consume, no output) every input
  whose head is a coordinate; otherwise skip every input whose head is the smallest coordinate.
  Union: all heads stops/`D` as for intersect; otherwise emit the smallest head coordinate m,
  inputs whose head is m consume and emit their payload, the others (bigger coordinate or a stop)
  emit `N`.
* reduce: one step per input token (`S0` emits the result, `Sn` emits `S(n-1)`, `D` emits `D`).
* spacc: one step per inner (crd, val) pair accumulated (reads the outer head too); one per outer
  coordinate (reads its closing inner `S0`/val `S0` and consumes all three); at an outer `S0`, one
  step per map entry, in coordinate order (peeks the three stop heads, emits the entry); then one
  step per outer stop/`D` consuming the three heads and emitting it.
* crd_drop: one step per inner token (reads the outer head too). Inner coordinate: emit it, and
  on the first one of a fiber also emit the outer coordinate. Inner `S0`: consume the outer
  coordinate; emit `S0` unless the fiber was empty (then both are dropped). Inner `S(n+1)` with
  outer `Sn`, and `D` with `D`: consume and emit both.
* join: one step per emitted token (see below).

Counters: `flops` = ALU results + reduce/spacc accumulations of `Val`/`N` tokens; `mem_reads` =
compressed-scan seg reads (2 per `Val` ref) + compressed-scan crd reads (1 per coordinate) +
array value reads (1 per `Val` ref); `mem_writes` = compressed level_write crd writes (1 per
`Val`) and seg writes (1 per `S0`) + value_write writes (1 per `Val`/`N`).

Tile-valued nodes (a `tile` parameter, see `sim.tiles`): values are `Tile`s (numpy arrays over
the node's named axes); `N` is a tile of zeros (or of the array's fill) for ALUs, reducers and
writers. Counters count tile elements so that blocked and scalar runs compare: an elementwise
ALU result of E elements is E FLOPs, a contraction (tile matmul) 2B³ - B² for BxB, a
reducer E FLOPs per accumulated tile, an array read or value write E words. Their latency and
initiation interval are the block-mode costs of `HwConfig.timing`; every other node keeps its
scalar timing (each node has one II, used between all of its steps).

Spec choices (where primitives.py is silent or ambiguous):

* A dense level_write stores nothing, so it counts no memory writes (it only checks that each
  fiber is exactly 0..dim-1); crd and seg writes are counted for compressed levels only.
* Dense scans read no memory (coordinates and positions are computed); locate reads none either.
* `Empty` is 0.0 for ALUs and reducers; so `max`-reduce of `N` and negatives gives 0. An empty
  fiber reduces to the identity: 0 (sum), -inf (max), +inf (min). spacc starts an entry at the
  identity, so its first value is stored as is.
* ALU arithmetic is IEEE float64 as numpy does it: x/0 is +-inf (0/0 nan), exp overflow is inf,
  sqrt of a negative is nan, rsqrt(x) = 1/sqrt(x), max/min propagate nan. A `scalar` is inserted
  as operand `scalar_pos` for any op but `const` (which needs a scalar and emits it per element);
  the operand count must then fit the op (graph error otherwise).
* fork deals `Val`/`N` round-robin with one lane counter for the whole stream (it does not reset
  at stops); stops and `D` go to every lane. join (param `depth`, default 0) is its exact inverse:
  an *element* is one `Val`/`N` token when depth = 0, or, when each dealt element grew `depth`
  levels in the lanes, the tokens up to and including its closing `S(depth-1)`. join keeps the
  same lane counter: if lane `idx`'s head belongs to an element (a `Val`/`N` or a `Sn` with
  n < depth) it consumes and emits it, moving to the next lane after the element's last token;
  if it is a `Sn` with n >= depth or `D`, every lane must hold that same head: consume all,
  emit it once. So fork -> join is the identity (depth 0).
* crd_drop only edits its two streams: streams below `inner` keep the (now orphaned) empty fibers
  of dropped coordinates. Chains (drop at level k+1 of k, then at level k of k-1) are fine for the
  streams they are given.
* Intersect/union crd streams must not hold `N`; payload heads must be aligned with their crd
  (element with coordinate, same stop with stop, `D` with `D`).
* Every input must end with `D` and be fully consumed; misaligned or malformed streams raise
  `MisalignedStreams` (an AssertionError) naming the node and the offending tokens.

    >>> format_tokens(scan(parse_tokens("0 1 S0 D"), seg=[0, 2, 3], crd=[5, 7, 6])[0])
    '5 7 S0 6 S0 S1 D'
    >>> format_tokens(reduce("1 2 S0 S0 4 S0 S1 D", "max"))
    '2 -inf 4 S0 D'
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UserError
from ..sam.graph import GraphError, SamGraph, Stream
from ..sam.primitives import PRIMITIVES
from .hw import MEMORY_KINDS, HwConfig
from .storage import Level, StoredTensor, WrittenTensor
from .tiles import Tile, TileSpec, stored_tile
from .tokens import Done, Empty, Repeat, Stop, Token, Val, as_tokens, format_tokens, is_elem, parse_tokens, \
    token_text

__all__ = ["run_graph", "GraphRun", "NodeRun", "apply", "MisalignedStreams", "ALU_OPS", "REDUCERS",
           "root", "scan", "locate", "repsig", "repeat", "intersect", "union", "array", "alu", "reduce",
           "spacc", "crd_drop", "level_write", "value_write", "broadcast", "fork", "join",
           "format_tokens", "parse_tokens"]

INF = float("inf")
NAN = float("nan")


class MisalignedStreams(GraphError):
    """Token streams that do not fit a primitive: a bug in whatever built the graph."""


# -- arithmetic ----------------------------------------------------------------------------------
def _div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a != a or a == 0:
            return NAN
        return math.copysign(INF, a) * math.copysign(1.0, b)


def _exp(a: float) -> float:
    try:
        return math.exp(a)
    except OverflowError:
        return INF


def _sqrt(a: float) -> float:
    return math.sqrt(a) if a >= 0 else NAN


def _max(a: float, b: float) -> float:
    if a != a or b != b:
        return NAN
    return a if a >= b else b


def _min(a: float, b: float) -> float:
    if a != a or b != b:
        return NAN
    return a if a <= b else b


def _bool(x: bool) -> float:
    return 1.0 if x else 0.0


ALU_OPS: dict[str, tuple[int, object]] = {  # op -> (number of operands, function)
    "neg": (1, lambda a: -a),
    "exp": (1, _exp),
    "sqrt": (1, _sqrt),
    "rsqrt": (1, lambda a: _div(1.0, _sqrt(a))),
    "tanh": (1, math.tanh),
    "erf": (1, math.erf),
    "abs": (1, abs),
    "const": (0, None),
    "coalesce": (0, None),  # N -> the scalar (a background other than 0), values pass
    "add": (2, lambda a, b: a + b),
    "sub": (2, lambda a, b: a - b),
    "mul": (2, lambda a, b: a * b),
    "div": (2, _div),
    "max": (2, _max),
    "min": (2, _min),
    "gt": (2, lambda a, b: _bool(a > b)),
    "ge": (2, lambda a, b: _bool(a >= b)),
    "lt": (2, lambda a, b: _bool(a < b)),
    "le": (2, lambda a, b: _bool(a <= b)),
    "eq": (2, lambda a, b: _bool(a == b)),
    "ne": (2, lambda a, b: _bool(a != b)),
    "select": (3, lambda a, b, c: b if a != 0 else c),
}

REDUCERS: dict[str, tuple[object, float]] = {  # kind -> (combine, identity)
    "sum": (lambda a, b: a + b, 0.0),
    "max": (_max, -INF),
    "min": (_min, INF),
}


def _num(tok) -> float:
    """The value of an element token (`N` counts as 0.0)."""
    return 0.0 if tok is Empty else float(tok.x)


# -- the execution context of one node -------------------------------------------------------------
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


# -- primitives ----------------------------------------------------------------------------------
def _root(c: _Ctx) -> None:
    c.emit("ref", Val(0))
    c.step()
    c.emit("ref", Done)
    c.step()


def _scan(c: _Ctx) -> None:
    level = c.level()
    fmt, dim = c.params.get("format", level.format), c.params.get("dim")
    if fmt != level.format:
        raise GraphError(f"{c.where()}: scans a {fmt} level, tensor {c.params['tensor']} level "
                         f"{c.params.get('level', 0)} is {level.format}")
    if not level.is_compressed and dim is not None and dim != level.dim:
        raise GraphError(f"{c.where()}: dim={dim} but the stored level has dim {level.dim}")
    while True:
        tok = c.pop("ref")
        if isinstance(tok, Val):
            r = tok.x
            if level.is_compressed:
                if not (isinstance(r, int) and 0 <= r < len(level.seg) - 1):
                    c.fail(f"reference out of range 0..{len(level.seg) - 2}", tok)
                c.counters["mem_reads"] += 2
            pairs = level.child_positions(r)
            for crd, pos in pairs:
                if level.is_compressed:
                    c.counters["mem_reads"] += 1
                c.emit("crd", Val(crd))
                c.emit("ref", Val(pos))
                c.step()
            c.emit_all(Stop(0))
            c.step()
        elif tok is Empty:
            if not level.is_compressed:  # a dense level under a missing parent: every coordinate, no data
                for crd in range(level.dim):
                    c.emit("crd", Val(crd))
                    c.emit("ref", Empty)
                    c.step()
            c.emit_all(Stop(0))
            c.step()
        elif isinstance(tok, Stop):
            c.emit_all(Stop(tok.n + 1))
            c.step()
        elif tok is Done:
            c.emit_all(Done)
            c.step()
            return
        else:
            c.fail("a ref stream holds", tok)


def _locate(c: _Ctx) -> None:
    dim = c.params.get("dim")
    if dim is None:
        dim = c.level().dim
    while True:
        a, b = c.pop("crd"), c.pop("ref")
        if isinstance(a, Val) and isinstance(b, Val):
            if not 0 <= a.x < dim:
                c.fail(f"coordinate out of range 0..{dim - 1}", a)
            c.emit("ref", Val(b.x * dim + a.x))
        elif is_elem(a) and is_elem(b):
            c.emit("ref", Empty)
        elif isinstance(a, Stop) and a == b:
            c.emit("ref", a)
        elif a is Done and b is Done:
            c.emit("ref", Done)
            c.step()
            return
        else:
            c.fail("crd and ref are not aligned", a, b)
        c.step()


def _repsig(c: _Ctx) -> None:
    while True:
        tok = c.pop("crd")
        if is_elem(tok):
            c.emit("repsig", Repeat)
        elif isinstance(tok, Stop) or tok is Done:
            c.emit("repsig", tok)
        else:
            c.fail("a crd stream holds", tok)
        c.step()
        if tok is Done:
            return


def _repeat(c: _Ctx) -> None:
    while True:
        sig, head = c.pop("sig"), c.peek("in")
        if sig is Repeat:
            if not is_elem(head):
                c.fail("signal R needs an element at the head of in", sig, head)
            c.emit("out", head)
        elif isinstance(sig, Stop) and sig.n == 0:
            if not is_elem(head):
                c.fail("signal S0 needs an element at the head of in", sig, head)
            c.pop("in")
            c.emit("out", sig)
        elif isinstance(sig, Stop):
            if head != Stop(sig.n - 1):
                c.fail(f"signal S{sig.n} needs S{sig.n - 1} at the head of in", sig, head)
            c.pop("in")
            c.emit("out", sig)
        elif sig is Done:
            if head is not Done:
                c.fail("signal D needs D at the head of in", sig, head)
            c.pop("in")
            c.emit("out", Done)
            c.step()
            return
        else:
            c.fail("a repsig stream holds", sig)
        c.step()


def _joiner(c: _Ctx, is_union: bool) -> None:
    k = c.arity

    def pop_pay(i, crd_tok):
        pay = c.pop(f"pay{i}")
        ok = is_elem(pay) if isinstance(crd_tok, Val) else pay == crd_tok
        if not ok:
            c.fail(f"payload {i} is not aligned with its crd", crd_tok, pay)
        return pay

    while True:
        heads = [c.peek(f"crd{i}") for i in range(k)]
        for h in heads:
            if not (isinstance(h, (Val, Stop)) or h is Done):
                c.fail("a crd stream holds", h)
        if any(h is Done for h in heads):
            for h in heads:
                if h is not Done:
                    c.fail("inputs are not aligned", Done, h)
            for i in range(k):
                c.pop(f"crd{i}")
                pop_pay(i, Done)
            c.emit_all(Done)
            c.step()
            return
        stops = [h for h in heads if isinstance(h, Stop)]
        for s in stops[1:]:
            if s != stops[0]:
                c.fail("inputs are not aligned", stops[0], s)
        vals = [h.x for h in heads if isinstance(h, Val)]
        if not vals:  # every head is the same stop
            for i in range(k):
                c.pop(f"crd{i}")
                pop_pay(i, stops[0])
            c.emit_all(stops[0])
        elif is_union:
            m = min(vals)
            c.emit("crd", Val(m))
            for i, h in enumerate(heads):
                if isinstance(h, Val) and h.x == m:
                    c.pop(f"crd{i}")
                    c.emit(f"pay{i}", pop_pay(i, h))
                else:
                    c.emit(f"pay{i}", Empty)
        elif not stops and all(x == vals[0] for x in vals):
            c.emit("crd", heads[0])
            for i, h in enumerate(heads):
                c.pop(f"crd{i}")
                c.emit(f"pay{i}", pop_pay(i, h))
        else:  # skip: every coordinate if some input waits at a stop, else the smallest ones
            m = min(vals)
            for i, h in enumerate(heads):
                if isinstance(h, Val) and (stops or h.x == m):
                    c.pop(f"crd{i}")
                    pop_pay(i, h)
        c.step()


def _array(c: _Ctx) -> None:
    tensor, spec = c.tensor(), c.tile
    vals, fill = tensor.vals, float(c.params.get("fill", tensor.fill))
    while True:
        tok = c.pop("ref")
        if isinstance(tok, Val):
            if not (isinstance(tok.x, int) and 0 <= tok.x < len(vals)):
                c.fail(f"reference out of range 0..{len(vals) - 1}", tok)
            if spec is None:
                c.counters["mem_reads"] += 1
                c.emit("val", Val(float(vals[tok.x])))
            else:
                c.counters["mem_reads"] += spec.out_elements
                c.emit("val", Val(Tile(stored_tile(tensor, tok.x, spec))))
        elif tok is Empty:
            c.emit("val", Val(fill) if spec is None else Val(Tile(spec.full(1, fill)[0])))
        elif isinstance(tok, Stop) or tok is Done:
            c.emit("val", tok)
        else:
            c.fail("a ref stream holds", tok)
        c.step()
        if tok is Done:
            return


def _alu_signature(kind_where: str, params: dict, connected: list[str]):
    op = params.get("op")
    if op not in ALU_OPS:
        raise GraphError(f"{kind_where}: unknown ALU op {op!r}")
    arity = params.get("arity") or len(connected)
    ports = "abc"[:arity]
    scalar, pos = params.get("scalar"), params.get("scalar_pos", 1)
    nargs, fn = ALU_OPS[op]
    if op in ("const", "coalesce"):
        if scalar is None or arity != 1:
            raise GraphError(f"{kind_where}: {op} needs a scalar and one input")
    elif nargs != arity + (scalar is not None) or (scalar is not None and not 0 <= pos <= arity):
        raise GraphError(f"{kind_where}: op {op} takes {nargs} operands, got {arity} inputs"
                         + (f" and a scalar at {pos}" if scalar is not None else ""))
    return op, ports, fn, (None if scalar is None else float(scalar)), pos


def _tile_alu(spec: TileSpec, op: str, toks, scalar, pos) -> Val:
    """One tile ALU result (N operands are tiles of zeros)."""
    if op == "coalesce":
        return Val(Tile(spec.full(1, scalar)[0])) if toks[0] is Empty else toks[0]
    if op == "const":
        return Val(Tile(spec.full(1, scalar)[0]))
    stacks = [spec.full(1, 0.0, axes) if t is Empty else t.x.a[None] for t, axes in zip(toks, spec.ins)]
    return Val(Tile(spec.alu(op, stacks, scalar, pos)[0]))


def _alu(c: _Ctx) -> None:
    op, ports, fn, scalar, pos = _alu_signature(c.where(), c.params, [p for p in "abc" if p in c.inputs])
    spec = c.tile
    while True:
        toks = [c.pop(p) for p in ports]
        if spec is not None and all(is_elem(t) for t in toks):
            c.emit("val", _tile_alu(spec, op, toks, scalar, pos))
            if op != "coalesce":
                c.counters["flops"] += spec.flops_per_token
        elif op == "coalesce" and is_elem(toks[0]):
            c.emit("val", Val(scalar if toks[0] is Empty else float(_num(toks[0]))))
        elif all(is_elem(t) for t in toks):
            if op == "const":
                result = scalar
            else:
                xs = [_num(t) for t in toks]
                if scalar is not None:
                    xs.insert(pos, scalar)
                result = fn(*xs)
            c.counters["flops"] += 1
            c.emit("val", Val(float(result)))
        else:
            first = toks[0]
            if not (isinstance(first, Stop) or first is Done or is_elem(first)):
                c.fail("a val stream holds", first)
            for t in toks[1:]:
                if t != first:
                    c.fail("inputs are not aligned", first, t)
            c.emit("val", first)
        c.step()
        if toks[0] is Done:
            return


def _reducer(c: _Ctx):
    """(combine, identity, value of an element token, FLOPs per element, wrap a result)."""
    kind = c.params.get("kind", "sum")
    if kind not in REDUCERS:
        raise GraphError(f"{c.where()}: unknown reduction {kind!r}")
    spec = c.tile
    if spec is None:
        return REDUCERS[kind] + (_num, 1, float)

    def element(tok):
        return spec.full(1, 0.0)[0] if tok is Empty else spec.inner(tok.x.a[None], kind)[0]

    return (lambda a, b: spec.combine(kind, a, b)), spec.identity(kind), element, spec.in_elements, Tile


def _reduce(c: _Ctx) -> None:
    combine, identity, element, flops, wrap = _reducer(c)
    acc, open_fiber = identity, False
    while True:
        tok = c.pop("val")
        if is_elem(tok):
            acc = combine(acc, element(tok))
            open_fiber = True
            c.counters["flops"] += flops
        elif isinstance(tok, Stop) and tok.n == 0:
            c.emit("val", Val(wrap(acc)))
            acc, open_fiber = identity, False
        elif isinstance(tok, Stop) or tok is Done:
            if open_fiber:
                c.fail("elements not closed by S0 before", tok)
            c.emit("val", Stop(tok.n - 1) if isinstance(tok, Stop) else Done)
        else:
            c.fail("a val stream holds", tok)
        c.step()
        if tok is Done:
            return


def _spacc(c: _Ctx) -> None:
    combine, identity, element, flops, wrap = _reducer(c)
    acc: dict = {}
    drain: list | None = None  # entries still to emit at an outer S0, largest coordinate first
    while True:
        outer = c.peek("crd_outer")
        if isinstance(outer, Val):
            inner = c.peek("crd_inner")
            if isinstance(inner, Val):
                c.pop("crd_inner")
                v = c.pop("val")
                if not is_elem(v):
                    c.fail("val is not aligned with crd_inner", inner, v)
                acc[inner.x] = combine(acc.get(inner.x, identity), element(v))
                c.counters["flops"] += flops
            elif inner == Stop(0):
                c.pop("crd_inner")
                v = c.pop("val")
                if v != inner:
                    c.fail("val is not aligned with crd_inner", inner, v)
                c.pop("crd_outer")
            else:
                c.fail("an outer coordinate needs an inner fiber", outer, inner)
        elif isinstance(outer, Stop) or outer is Done:
            if acc and outer != Stop(0):
                c.fail("outer coordinates not closed by S0 before", outer)
            want = Stop(outer.n + 1) if isinstance(outer, Stop) else Done
            inner, v = c.peek("crd_inner"), c.peek("val")
            if inner != want:
                c.fail("crd_inner is not aligned with crd_outer", outer, inner)
            if v != want:
                c.fail("val is not aligned with crd_inner", inner, v)
            if outer == Stop(0) and drain is None:
                drain = sorted(acc.items(), key=lambda e: e[0], reverse=True)
                acc = {}
            if drain:
                crd, value = drain.pop()
                c.emit("crd", Val(crd))
                c.emit("val", Val(wrap(value)))
            else:
                drain = None
                for port in ("crd_outer", "crd_inner", "val"):
                    c.pop(port)
                c.emit_all(outer)
                c.step()
                if outer is Done:
                    return
                continue
        else:
            c.fail("a crd stream holds", outer)
        c.step()


def _spacc2(c: _Ctx) -> None:
    """Order-2 accumulator: (outer r, mid w1, inner w2, val) -> (w1, w2, val) with r reduced.

    Steps: one per inner (w2, val) pair accumulated; one per mid coordinate (consuming its
    inner `S0`); one per outer coordinate (consuming its mid `S0` and inner `S1`); at an outer
    `S0`, one step per emitted w1 coordinate, one per emitted (w2, val) entry and one per closing
    `S0` of a w2 fiber; then one step per outer stop or `D`, consuming the aligned stops of all
    inputs and emitting `Sn` on crd_mid and `S(n+1)` on crd and val."""
    combine, identity, element, flops, wrap = _reducer(c)
    acc: dict = {}
    while True:
        outer = c.peek("crd_outer")
        if isinstance(outer, Val):
            mid = c.peek("crd_mid")
            if isinstance(mid, Val):
                inner = c.peek("crd_inner")
                if isinstance(inner, Val):
                    c.pop("crd_inner")
                    v = c.pop("val")
                    if not is_elem(v):
                        c.fail("val is not aligned with crd_inner", inner, v)
                    row = acc.setdefault(mid.x, {})
                    row[inner.x] = combine(row.get(inner.x, identity), element(v))
                    c.counters["flops"] += flops
                elif inner == Stop(0):
                    c.pop("crd_inner")
                    if c.pop("val") != inner:
                        c.fail("val is not aligned with crd_inner", inner)
                    acc.setdefault(mid.x, {})
                    c.pop("crd_mid")
                else:
                    c.fail("a mid coordinate needs an inner fiber", mid, inner)
            elif mid == Stop(0):
                inner = c.peek("crd_inner")
                if inner != Stop(1) or c.peek("val") != Stop(1):
                    c.fail("crd_inner is not aligned with crd_mid", mid, inner)
                for port in ("crd_inner", "val", "crd_mid", "crd_outer"):
                    c.pop(port)
            else:
                c.fail("an outer coordinate needs a mid fiber", outer, mid)
            c.step()
        elif isinstance(outer, Stop) or outer is Done:
            if acc and outer != Stop(0):
                c.fail("outer coordinates not closed by S0 before", outer)
            k = outer.n if isinstance(outer, Stop) else None
            wants = {"crd_mid": Stop(k + 1) if k is not None else Done,
                     "crd_inner": Stop(k + 2) if k is not None else Done,
                     "val": Stop(k + 2) if k is not None else Done}
            for port, want in wants.items():
                if c.peek(port) != want:
                    c.fail(f"{port} is not aligned with crd_outer", outer, c.peek(port))
            if outer == Stop(0):
                for w1 in sorted(acc):
                    c.emit("crd_mid", Val(w1))
                    c.step()
                    for w2, value in sorted(acc[w1].items(), key=lambda e: e[0]):
                        c.emit("crd", Val(w2))
                        c.emit("val", Val(wrap(value)))
                        c.step()
                    c.emit("crd", Stop(0))
                    c.emit("val", Stop(0))
                    c.step()
                acc = {}
            for port in ("crd_outer", "crd_mid", "crd_inner", "val"):
                c.pop(port)
            if outer is Done:
                for port in ("crd_mid", "crd", "val"):
                    c.emit(port, Done)
                c.step()
                return
            c.emit("crd_mid", Stop(k))
            c.emit("crd", Stop(k + 1))
            c.emit("val", Stop(k + 1))
            c.step()
        else:
            c.fail("a crd stream holds", outer)


def _crd_drop(c: _Ctx) -> None:
    started = False
    while True:
        inner, outer = c.peek("inner"), c.peek("outer")
        if isinstance(inner, Val):
            if not isinstance(outer, Val):
                c.fail("an inner coordinate needs an outer coordinate", outer, inner)
            if not started:
                c.emit("outer", outer)
                started = True
            c.pop("inner")
            c.emit("inner", inner)
        elif inner == Stop(0):
            if not isinstance(outer, Val):
                c.fail("an inner fiber needs an outer coordinate", outer, inner)
            c.pop("outer")
            c.pop("inner")
            if started:
                c.emit("inner", inner)
            started = False
        elif isinstance(inner, Stop) or inner is Done:
            want = Stop(inner.n - 1) if isinstance(inner, Stop) else Done
            if outer != want:
                c.fail("outer is not aligned with inner", outer, inner)
            c.pop("outer")
            c.pop("inner")
            c.emit("outer", outer)
            c.emit("inner", inner)
            if inner is Done:
                c.step()
                return
        else:
            c.fail("a crd stream holds", inner)
        c.step()


def _level_write(c: _Ctx) -> None:
    fmt, dim = c.params.get("format", "compressed"), c.params.get("dim")
    compressed = fmt == "compressed"
    if not compressed and (fmt != "dense" or dim is None):
        raise GraphError(f"{c.where()}: format must be compressed or dense with a dim, got {fmt} dim={dim}")
    seg, crd, count = [0], [], 0  # count: coordinates in the open fiber
    while True:
        tok = c.pop("crd")
        if isinstance(tok, Val):
            if compressed:
                if (dim is not None and not 0 <= tok.x < dim) or (count and tok.x <= crd[-1]):
                    c.fail("coordinates must increase within a fiber and lie in 0..dim-1",
                           *[Val(x) for x in crd[-1:] if count], tok)
                crd.append(tok.x)
                c.counters["mem_writes"] += 1
            elif tok.x != count:
                c.fail(f"a dense level's fiber must hold 0..{dim - 1}", Val(count), tok)
            count += 1
        elif tok == Stop(0):
            if compressed:
                seg.append(len(crd))
                c.counters["mem_writes"] += 1
            elif count != dim:
                c.fail(f"a dense level's fiber must hold {dim} coordinates, got {count} before", tok)
            count = 0
        elif isinstance(tok, Stop) or tok is Done:
            if count:
                c.fail("coordinates not closed by S0 before", tok)
        else:
            c.fail("a crd stream holds", tok)
        c.step()
        if tok is Done:
            break
    c.written_level = Level("compressed", dim, seg, crd) if compressed else Level("dense", dim)


def _value_write(c: _Ctx) -> None:
    vals, spec = [], c.tile
    while True:
        tok = c.pop("val")
        if is_elem(tok) and spec is not None:
            vals.append(spec.full(1, 0.0)[0] if tok is Empty else tok.x.a)
            c.counters["mem_writes"] += spec.out_elements
        elif is_elem(tok):
            vals.append(_num(tok))
            c.counters["mem_writes"] += 1
        elif not (isinstance(tok, Stop) or tok is Done):
            c.fail("a val stream holds", tok)
        c.step()
        if tok is Done:
            break
    c.written_vals = vals


def _check_payload(c: _Ctx, tok) -> None:
    if not (is_elem(tok) or isinstance(tok, Stop) or tok is Done):
        c.fail("a ref/val stream holds", tok)


def _broadcast(c: _Ctx) -> None:
    while True:
        tok = c.pop("in")
        c.emit_all(tok)
        c.step()
        if tok is Done:
            return


def _lanes(c: _Ctx) -> int:
    lanes = c.params.get("lanes", c.arity)
    if lanes != c.arity or c.arity < 1:
        raise GraphError(f"{c.where()}: lanes={lanes} but arity={c.arity}")
    return lanes


def _fork(c: _Ctx) -> None:
    lanes, idx = _lanes(c), 0
    while True:
        tok = c.pop("in")
        _check_payload(c, tok)
        if is_elem(tok):
            c.emit(f"out{idx}", tok)
            idx = (idx + 1) % lanes
        else:
            c.emit_all(tok)
        c.step()
        if tok is Done:
            return


def _join(c: _Ctx) -> None:
    lanes, idx, depth = _lanes(c), 0, c.params.get("depth", 0)
    while True:
        head = c.peek(f"in{idx}")
        _check_payload(c, head)
        if is_elem(head) or (isinstance(head, Stop) and head.n < depth):
            c.pop(f"in{idx}")
            c.emit("out", head)
            if (depth == 0) or head == Stop(depth - 1):
                idx = (idx + 1) % lanes
        else:
            for lane in range(lanes):
                other = c.peek(f"in{lane}")
                if other != head:
                    c.fail(f"lane {lane} is not at the stop of lane {idx}", head, other)
            for lane in range(lanes):
                c.pop(f"in{lane}")
            c.emit("out", head)
            if head is Done:
                c.step()
                return
        c.step()


IMPLS = {
    "root": _root, "scan": _scan, "locate": _locate, "repsig": _repsig, "repeat": _repeat,
    "intersect": lambda c: _joiner(c, False), "union": lambda c: _joiner(c, True),
    "array": _array, "alu": _alu, "reduce": _reduce, "spacc": _spacc, "spacc2": _spacc2, "crd_drop": _crd_drop,
    "level_write": _level_write, "value_write": _value_write, "broadcast": _broadcast,
    "fork": _fork, "join": _join,
}
assert set(IMPLS) == set(PRIMITIVES), set(PRIMITIVES) ^ set(IMPLS)

WRITERS = ("level_write", "value_write")


# -- running -------------------------------------------------------------------------------------
@dataclass
class NodeRun:
    """Everything one node produced."""

    outs: dict[str, list[Token]]
    times: dict[str, list[int]]
    steps: int
    last_step: int | None
    counters: dict[str, int]
    written_level: Level | None = None
    written_vals: list[float] | None = None
    consumed: dict[str, list[int]] | None = None  # step time at which each input token was consumed
    log: list | None = None  # per step: ((port, index) read, (port, count) consumed, (port, index) emitted)


def _run_node(node_id, kind, params, arity, inputs: dict[str, tuple[list, list]], tensors, hw,
              names: dict[str, str] | None = None, record: bool = False) -> NodeRun:
    chans = {p: _Chan(toks, times, (names or {}).get(p, p)) for p, (toks, times) in inputs.items()}
    c = _Ctx(node_id, kind, params, arity, chans, tensors, hw)
    c.record = record
    IMPLS[kind](c)
    for port, ch in chans.items():
        if ch.pos != len(ch.toks):
            c.fail(f"input {port} ({ch.name}) has tokens after its D", ch.toks[ch.pos])
    return NodeRun(c.outs, c.out_times, c.steps, c.t, c.counters, c.written_level, c.written_vals,
                   c.consumed, c.log if record else None)


def apply(kind: str, inputs: dict, params: dict | None = None, *, tensors: dict | None = None,
          arity: int = 0, hw: HwConfig | None = None) -> NodeRun:
    """Run one primitive on token lists (or their text); every input token is visible at time 0,
    unless an input is given as a (tokens, times) pair."""
    timed = {}
    for port, value in inputs.items():
        if isinstance(value, tuple):
            toks, times = as_tokens(value[0]), list(value[1])
        else:
            toks = as_tokens(value)
            times = [0] * len(toks)
        timed[port] = (toks, times)
    return _run_node(0, kind, dict(params or {}), arity, timed, tensors or {}, hw or HwConfig())


@dataclass
class GraphRun:
    written: dict[str, WrittenTensor]
    cycles: int
    node_steps: dict[int, int]
    stream_tokens: dict[Stream, int]
    counters: dict[str, int]
    streams: dict[Stream, list[Token]] | None = None
    stream_times: dict[Stream, list[int]] | None = None
    max_occupancy: dict[Stream, int] | None = None  # most tokens waiting in each channel at once
    step_log: dict[int, list] | None = None  # per node, what each step read, consumed and emitted


def channel_occupancy(sent: list[int], consumed: list[int]) -> int:
    """Most tokens in a channel at once: a token occupies it from its send time until the step
    that consumes it (a consume and a send at the same time free the slot first)."""
    best, j, n = 0, 0, len(consumed)
    for k, t in enumerate(sent):
        while j < n and consumed[j] <= t:
            j += 1
        best = max(best, k + 1 - j)
    return best


def run_graph(graph: SamGraph, tensors: dict[str, StoredTensor], hw: HwConfig | None = None,
              keep_streams: bool = False, record_steps: bool = False) -> GraphRun:
    """Simulate `graph` on stored input tensors; see the module docstring for the cycle model."""
    hw = hw or HwConfig()
    produced: dict[Stream, tuple[list, list]] = {}
    written: dict[str, WrittenTensor] = {}
    node_steps: dict[int, int] = {}
    counters = {"flops": 0, "mem_reads": 0, "mem_writes": 0}
    occupancy: dict[Stream, int] = {}
    step_log: dict[int, list] = {}
    cycles = 0
    for node in graph.nodes:
        if node.kind not in IMPLS:
            raise GraphError(f"n{node.id}: unknown primitive {node.kind!r}")
        inputs, names = {}, {}
        for port, stream in node.inputs.items():
            if stream not in produced:
                raise GraphError(f"n{node.id} {node.kind}: input {port} reads {stream}, which is not "
                                 "an output of an earlier node")
            inputs[port], names[port] = produced[stream], str(stream)
        run = _run_node(node.id, node.kind, node.params, node.arity, inputs, tensors, hw, names, record_steps)
        if record_steps:
            step_log[node.id] = run.log
        for port in run.outs:
            produced[Stream(node.id, port)] = (run.outs[port], run.times[port])
        node_steps[node.id] = run.steps
        for port, stream in node.inputs.items():
            producer = graph.nodes[stream.node]
            lat = hw.timing(producer.kind, producer.params)[0]
            sent = [t - lat for t in produced[stream][1]]
            occupancy[stream] = channel_occupancy(sent, run.consumed[port])
        for key, value in run.counters.items():
            counters[key] += value
        if node.kind in WRITERS:
            cycles = max(cycles, run.last_step)
            out = written.setdefault(node.params["tensor"], WrittenTensor())
            if node.kind == "level_write":
                k = node.params.get("level", 0)
                if k in out.levels:
                    raise GraphError(f"n{node.id}: level {k} of {node.params['tensor']} is written twice")
                out.levels[k] = run.written_level
            else:
                if out.vals is not None:
                    raise GraphError(f"n{node.id}: values of {node.params['tensor']} are written twice")
                out.vals = run.written_vals
    return GraphRun(
        written=written, cycles=cycles, node_steps=node_steps,
        stream_tokens={s: len(toks) for s, (toks, _) in produced.items()}, counters=counters,
        streams={s: toks for s, (toks, _) in produced.items()} if keep_streams else None,
        stream_times={s: times for s, (_, times) in produced.items()} if keep_streams else None,
        max_occupancy=occupancy, step_log=step_log if record_steps else None)


# -- per-primitive functions on token lists (text or tokens) -----------------------------------------
def root() -> list[Token]:
    return apply("root", {}).outs["ref"]


def scan(refs, *, seg=None, crd=None, dim=None, format=None) -> tuple[list[Token], list[Token]]:
    """Scan a compressed level (give seg and crd) or a dense level (give dim) -> (crd, ref)."""
    if format is None:
        format = "compressed" if seg is not None else "dense"
    level = (Level("compressed", dim, list(seg), list(crd)) if format == "compressed" else Level("dense", dim))
    run = apply("scan", {"ref": refs}, {"tensor": "T", "level": 0, "format": format, "dim": dim},
                tensors={"T": StoredTensor([level], [])})
    return run.outs["crd"], run.outs["ref"]


def locate(crd, ref, *, dim: int) -> list[Token]:
    return apply("locate", {"crd": crd, "ref": ref}, {"dim": dim}).outs["ref"]


def repsig(crd) -> list[Token]:
    return apply("repsig", {"crd": crd}).outs["repsig"]


def repeat(inp, sig) -> list[Token]:
    return apply("repeat", {"in": inp, "sig": sig}).outs["out"]


def _joiner_fn(kind, pairs):
    inputs = {}
    for i, (crd, pay) in enumerate(pairs):
        inputs[f"crd{i}"], inputs[f"pay{i}"] = crd, pay
    run = apply(kind, inputs, arity=len(pairs))
    return run.outs["crd"], [run.outs[f"pay{i}"] for i in range(len(pairs))]


def intersect(*pairs) -> tuple[list[Token], list[list[Token]]]:
    """intersect((crd0, pay0), (crd1, pay1), ...) -> (crd, [pay0, pay1, ...])"""
    return _joiner_fn("intersect", pairs)


def union(*pairs) -> tuple[list[Token], list[list[Token]]]:
    return _joiner_fn("union", pairs)


def array(refs, vals) -> list[Token]:
    return apply("array", {"ref": refs}, {"tensor": "T"},
                 tensors={"T": StoredTensor([], list(vals))}).outs["val"]


def alu(op: str, *inputs, scalar=None, scalar_pos: int = 1) -> list[Token]:
    params = {"op": op, "arity": len(inputs), "scalar": scalar, "scalar_pos": scalar_pos}
    return apply("alu", dict(zip("abc", inputs)), params).outs["val"]


def reduce(vals, kind: str = "sum") -> list[Token]:
    return apply("reduce", {"val": vals}, {"kind": kind}).outs["val"]


def spacc(crd_outer, crd_inner, vals, kind: str = "sum") -> tuple[list[Token], list[Token]]:
    run = apply("spacc", {"crd_outer": crd_outer, "crd_inner": crd_inner, "val": vals}, {"kind": kind})
    return run.outs["crd"], run.outs["val"]


def crd_drop(outer, inner) -> tuple[list[Token], list[Token]]:
    run = apply("crd_drop", {"outer": outer, "inner": inner})
    return run.outs["outer"], run.outs["inner"]


def level_write(crd, *, format: str = "compressed", dim: int | None = None) -> Level:
    return apply("level_write", {"crd": crd}, {"tensor": "T", "level": 0, "format": format,
                                               "dim": dim}).written_level


def value_write(vals) -> list[float]:
    return apply("value_write", {"val": vals}, {"tensor": "T"}).written_vals


def broadcast(inp, k: int) -> list[list[Token]]:
    run = apply("broadcast", {"in": inp}, arity=k)
    return [run.outs[f"out{i}"] for i in range(k)]


def fork(inp, lanes: int) -> list[list[Token]]:
    run = apply("fork", {"in": inp}, {"lanes": lanes}, arity=lanes)
    return [run.outs[f"out{i}"] for i in range(lanes)]


def join(lanes: list, depth: int = 0) -> list[Token]:
    run = apply("join", {f"in{i}": lane for i, lane in enumerate(lanes)},
                {"lanes": len(lanes), "depth": depth}, arity=len(lanes))
    return run.outs["out"]
