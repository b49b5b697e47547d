"""What every kernel of the streaming engine shares: state slots, status codes, the records a
kernel takes, the port protocol and the step rule, the memory model, and `Runner`, the Python
side of one node.

A kernel is a numba function that runs one node's step loop (the oracle's, read for read) on
whatever its input channels hold, and returns when it must wait (an input has no token yet, or
an output buffer is full), when it is done (it handled `D`), or when its input is malformed.
Everything that must survive until the next call lives in the node's state arrays: `S` (int64:
the time of the last step, step and memory counters, kernel-specific slots from `FREE` on) and
`F` (float64, e.g. a reducer's accumulator). A step checks that every head it reads is there and
that every output has room *before* it changes anything, so stopping between two steps is
always exact: the times of the tokens it emits follow the same recurrence
`t = max(t + II, visible times of the heads read)` whichever call produces them.

Ports and state: a kernel takes named records (`Runner.records_args`): `Node` (S, F and the
shared tables `channel.Tables`), an `In` per input port, an `Out` per output port (`Ins`/`Outs`
for a kernel over any number of lanes), and the runner's state record (`Runner.state`: its
parameters and buffers). `opened`/`closed` turn an input's place in the tables into a local
position and back, `out_opened`/`out_closed` an output's. A kernel records the step time at
which it consumes each input token in the reader's `cons` array (aligned with the channel's
window); the engine hands those times to the reader's occupancy merge after the call.

The step loop itself works on plain locals: the records' arrays, taken from them before the
loop starts (`inlet`, `outlet`), and scalar helpers (`missing`, `full`; the step rule: a step
happens at `step_time`, II after the previous one and no earlier than the heads it reads are
visible, and one that emits also no earlier than `gated` allows). Reading a record's field inside
the loop, or handing arrays to helpers there (inline or not), made kernels up to several times
slower: a loop hands arrays only to `gated` and to the one-store helpers `timed` and `stepped`
(compiled as the store written out), and notes the input it waits on in S[PORT] itself (a helper
that took S to do it made the ALU's and array's loops 20-40% slower). The same statements
arranged otherwise can compile a few percent faster or slower: a kernel whose loop measured
slower with a helper writes that part out (the ALU's, scan's, the order-2 accumulator's, array's
and reduce's).

Bounded channels (back-pressure, `Runner.backpressure`): an `Out` also holds its reader's
`cons` array (`gate`). Before a step a kernel checks room only on the outputs that step emits
on (`out_opened`'s room: the buffer, and on a channel bounded to N tokens the reader's cursor +
N), and a step emitting the token at window position j of such a channel happens no earlier
than the reader consumed the token N before it (`gated`): `t = max(t + II, reads, cons[j - N])`,
as `sim.bounded` replays it.

    >>> S = new_state(ii=1)
    >>> int(S[T]), int(S[II]), int(S[STEPS])
    (-1, 1, 0)
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit
from numba._dispatcher import compute_fingerprint
from numba.core import types
from numba.core.typing.typeof import Purpose, typeof
from numba.extending import overload

from ..hw import MEMORY_KINDS, HwConfig
from ..oracle.arith import NAN
from ..oracle.context import _Ctx
from ..tiles import TileSpec

# status of a kernel call (YIELD: an accumulator's event log is full; the runner empties it)
WAIT_IN, WAIT_OUT, DONE, FAIL, GROW, YIELD = 1, 2, 3, 4, 5, 6
# kinds of an accumulator's logged events (tiles.accumulate replays them): ACC combined a value into
# a key, EMIT sent a key's entry out, SEAL queued a key's entry as finished, EMIT_SEALED sent the oldest
ACC, EMIT, SEAL, EMIT_SEALED = 0, 1, 2, 3
# state slots
T, II, STEPS, FLOPS, READS, WRITES, WORDS, PORT, NEED, FREE = range(10)
STATE_SLOTS = 24

INF = math.inf
# The oracle's NaN constant, passed to kernels in an array: a NaN literal would let LLVM fold
# `x >= 0 ? sqrt(x) : NaN` into `sqrt(x)`, whose NaN has another sign bit.
NANV = np.array([NAN], dtype=np.float64)
NO_MEM = np.zeros(4, dtype=np.int64)  # memory model off
NO_GATE = np.zeros(1, dtype=np.int64)  # the gate of an output that is never bounded


def new_state(ii: int) -> np.ndarray:
    S = np.zeros(STATE_SLOTS, dtype=np.int64)
    S[T] = -ii  # so that the first step happens at max(0, visible times)
    S[II] = ii
    return S


class Node(NamedTuple):
    """A kernel's own state arrays and the engine's shared channel tables (`channel.Tables`)."""
    S: np.ndarray
    F: np.ndarray
    CH: np.ndarray
    RD: np.ndarray


class In(NamedTuple):
    """An input port as a kernel reads it: the channel's window (kind, data, sent), this reader's
    consume times (cons, aligned with the window), the channel's and reader's rows in the tables
    and the producer's latency (`opened`, `closed`).

        >>> x = np.zeros(1, dtype=np.int64)
        >>> In(x, x, x, x, ch=0, rd=0, lat=2).lat
        2
    """
    kind: np.ndarray
    data: np.ndarray
    sent: np.ndarray
    cons: np.ndarray
    ch: int
    rd: int
    lat: int


class Out(NamedTuple):
    """An output port as a kernel writes it: the channel's window (kind, data, sent), its gate
    (the one reader's consume times; None when the channel is not bounded, which compiles the
    kernel without the bound's check: `gated`) and its row in the tables (`out_opened`,
    `out_closed`)."""
    kind: np.ndarray
    data: np.ndarray
    sent: np.ndarray
    gate: np.ndarray | None
    ch: int


class Ins(NamedTuple):
    """k input ports as one record, for a kernel that picks among them by number (lanes): tuples
    of their arrays (`In`'s fields; data None where the kernel never reads it) and arrays of their
    rows and latencies. Made with `Ins.of`."""
    kind: tuple
    data: tuple | None
    sent: tuple
    cons: tuple
    ch: np.ndarray
    rd: np.ndarray
    lat: np.ndarray

    @staticmethod
    def of(ports: list, data: bool = True) -> Ins:
        return Ins(tuple(p.kind for p in ports), tuple(p.data for p in ports) if data else None,
                   tuple(p.sent for p in ports), tuple(p.cons for p in ports),
                   *(np.array([getattr(p, f) for p in ports], dtype=np.int64) for f in ("ch", "rd", "lat")))


class Outs(NamedTuple):
    """k output ports as one record (see `Ins`). Made with `Outs.of`."""
    kind: tuple
    data: tuple | None
    sent: tuple
    gate: tuple
    ch: np.ndarray

    @staticmethod
    def of(ports: list, data: bool = True) -> Outs:
        return Outs(tuple(o.kind for o in ports), tuple(o.data for o in ports) if data else None,
                    tuple(o.sent for o in ports), tuple(NO_GATE if o.gate is None else o.gate for o in ports),
                    np.array([o.ch for o in ports], dtype=np.int64))


@njit(inline="always")
def window(nd, c, r):
    """(position, end, final) of reader r of channel c: the next unconsumed token's index in the
    window, the window's length, whether the producer is done."""
    return nd.RD[r, 0] - nd.CH[c, 0], nd.CH[c, 1], nd.CH[c, 2] != 0


@njit(inline="always")
def opened(nd, p):
    """`window` of input port p (an `In`), and its latency: (position, end, final, latency)."""
    pos, end, final = window(nd, p.ch, p.rd)
    return pos, end, final, p.lat


@njit(inline="always")
def opened_lane(nd, g, i):
    """`window` of input i of g (an `Ins`; its latencies are the array g.lat)."""
    return window(nd, g.ch[i], g.rd[i])


@njit(inline="always")
def store(nd, c, r, pos):
    """Store reader r's position in channel c's window (the engine then counts what it consumed:
    `channel.sync`)."""
    nd.RD[r, 0] = pos + nd.CH[c, 0]


@njit(inline="always")
def closed(nd, p, pos):
    """`store` input port p's position."""
    store(nd, p.ch, p.rd, pos)


@njit(inline="always")
def room(nd, c, size):
    """(fill position, room, depth, window base) of channel c as an output whose buffer holds
    `size` tokens: room is the window position it may fill up to (the buffer's size; on a channel
    bounded to depth N tokens also its reader's cursor + N), depth 0 = unbounded."""
    CH = nd.CH
    d = CH[c, 3]
    cap = size
    if d != 0:
        cap = min(cap, nd.RD[CH[c, 4], 0] - CH[c, 0] + d)
    return CH[c, 1], cap, d, CH[c, 0]


@njit(inline="always")
def out_opened(nd, o):
    """`room` of output port o (an `Out`)."""
    return room(nd, o.ch, o.kind.shape[0])


@njit(inline="always")
def out_opened_lane(nd, g, i):
    """`room` of output i of g (an `Outs`)."""
    return room(nd, g.ch[i], g.kind[i].shape[0])


@njit(inline="always")
def out_closed(nd, c, j):
    """Store channel c's fill position j (c: an output's `ch`)."""
    nd.CH[c, 1] = j


@njit(inline="always")
def inlet(nd, p):
    """Input port p's arrays, then its `opened`: (kind, data, sent, cons, position, end, final,
    latency)."""
    pos, end, final, lat = opened(nd, p)
    return p.kind, p.data, p.sent, p.cons, pos, end, final, lat


@njit(inline="always")
def outlet(nd, o):
    """Output port o's arrays, then its `out_opened`: (kind, data, sent, gate, fill position,
    room, depth, window base)."""
    j, cap, d, base = out_opened(nd, o)
    return o.kind, o.data, o.sent, o.gate, j, cap, d, base


@njit(inline="always")
def resumed(S):
    """Where a call starts: S[PORT], the input it waits on if it does, back to 0 (a kernel notes
    any other when it finds that input `missing`), and (the last step's time, II, steps 0,
    status 0)."""
    S[PORT] = 0
    return S[T], S[II], 0, 0


@njit(inline="always")
def missing(pos, end, final):
    """WAIT_IN when an input at `pos` (`window`) has no token yet, FAIL when it never will, else 0
    (a kernel then notes the input in S[PORT] unless it is input 0: `resumed`)."""
    if pos < end:
        return 0
    return FAIL if final else WAIT_IN


@njit(inline="always")
def full(j, cap):
    """WAIT_OUT when an output has no room at fill position j (`room`), else 0."""
    return WAIT_OUT if j >= cap else 0


@njit(inline="always")
def timed(x, pos, t):
    """x[pos] = t, and the next position: a step at t consumed token pos of an input (x: its
    reader's `cons`) or emitted token pos of an output (x: its `sent`)."""
    x[pos] = t
    return pos + 1


@njit(inline="always")
def stepped(cons, pos, t, steps, last):
    """The end of a step at t that consumed the input token at pos (D if `last`): (the next
    position, the steps so far, DONE after D else 0: the status the step loop stops on)."""
    cons[pos] = t
    return pos + 1, steps + 1, DONE if last else 0


@njit(inline="always")
def step_time(t, ii, visible):
    """The step rule: a step comes II after the previous one and no earlier than the heads it
    reads are visible (`visible`: the latest of their sent times + latencies)."""
    return max(t + ii, max(visible, 0))


@njit(inline="always")
def settle(S, t, steps):
    """Store the step time and count the steps of a call."""
    S[T] = t
    S[STEPS] += steps


@njit(inline="always")
def left(nd, t, steps, status, o, j):
    """A call's end: `settle`, store output o's fill position j, and the status to return."""
    settle(nd.S, t, steps)
    out_closed(nd, o.ch, j)
    return status


def _ungated(t, gate, j, d, base):
    """`gated` of an output whose channel is not bounded (its gate None): t."""
    return t


def _gated_by(t, gate, j, d, base):
    """`gated` of an output with a gate. Written as a `max`: returning the gate's value after a
    comparison made LLVM compile every emitting kernel's step loop about twice as slow, bounded or
    not (bench/sim_speed.py --against measures such a change)."""
    if d != 0 and base + j >= d:
        return max(t, gate[j - d])
    return t


def _gate(t, gate, j, d, base):
    """Typed by its overload: `_ungated` where the gate is None, else `_gated_by`."""


@overload(_gate, inline="always")
def _gate_for(t, gate, j, d, base):
    return _ungated if isinstance(gate, types.NoneType) else _gated_by


_ungated.kernel_source = _gated_by.kernel_source = _gate_for.kernel_source = True  # `kernel_cache`


@njit(inline="always")
def gated(t, gate, j, d, base):
    """`t`, or later if a step at `t` emitting window position j of a channel bounded to d
    tokens must wait for the reader to consume the token d before it (`gate`: its consume
    times, aligned with the window). An output whose channel is not bounded has no gate (`Out`'s
    gate None): its kernels are compiled without the check, as before bounded channels."""
    return _gate(t, gate, j, d, base)


@njit(cache=True)
def stall(mem, before, words, done):
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


_ENTRIES: dict = {}  # (dispatcher, the arguments' fingerprints) -> compiled function (`compiled_entry`)


def compiled_entry(dispatcher, args: tuple):
    """The compiled function that numba's `dispatcher` runs for `args` (their exact types), to
    be called directly: a call then skips the dispatcher's typing of every argument, about 1 µs
    for a kernel's 20-odd arrays, which a bounded run pays once per N tokens. The dispatcher
    itself while no exact match is compiled (it compiles or loads one on its next call).
    Found once per process and argument types: the lookup keys on numba's fingerprints of the
    arguments (what its dispatcher keys on, 0.4 µs an array), since typing them in Python takes
    35 µs an array, which every runner of every run would pay.

        >>> entry = compiled_entry(stall, (NO_MEM, 0, 1, False))
        >>> entry is stall or int(entry(NO_MEM, 0, 1, False)) == 0
        True
    """
    try:
        key = (dispatcher, *map(compute_fingerprint, args))
    except (TypeError, ValueError, NotImplementedError):  # a value numba's dispatcher types the slow way
        key = None
    found = _ENTRIES.get(key) if key is not None else None
    if found is None:
        overload = dispatcher.overloads.get(tuple(typeof(a, Purpose.argument) for a in args))
        if overload is None:
            return dispatcher
        found = overload.entry_point
        if key is not None:
            _ENTRIES[key] = found
    return found


class NeedOracle(Exception):
    """The node is outside what the kernels handle: the oracle runs it."""


def counters(S) -> dict:
    return {"flops": int(S[FLOPS]), "mem_reads": int(S[READS]), "mem_writes": int(S[WRITES])}


class Runner:
    """The Python side of one node: its ports and channels, its state, the kernel call, and
    whatever happens around it (tile values, written tensors). Subclasses set `kernel`, and
    override `check` (raise NeedOracle for what the kernel does not handle), `out_dtype`,
    `state` (the kernel's state record), `port_args` where a kernel takes its ports otherwise
    than one record each, and `after` (work on the tokens a call moved)."""

    kernel = None
    backpressure = False  # the kernel takes a gate per output and honours bounded channels (see above)
    ins: tuple[str, ...] = ()
    outs: tuple[str, ...] = ()

    def __init__(self, node, tensors, hw: HwConfig, cache: dict):
        self.node, self.id, self.kind, self.params = node, node.id, node.kind, node.params
        self.arity, self.tensors, self.hw, self.cache = node.arity, tensors, hw, cache
        self.tile = TileSpec.of(node.kind, node.params)
        lat, ii = hw.timing(node.kind, node.params)
        self.lat, self.ii = int(lat), int(ii)
        self.S = new_state(self.ii)
        self.F = np.zeros(4, dtype=np.float64)
        self.in_ch: list = []
        self.out_ch: list = []
        self.readers: list[int] = []
        self._reader_objects: list = []  # the `channel.Reader` of each input (`attach_inputs`)
        self._args = None
        self._entry = None  # the kernel's compiled function for `_args` (`compiled_entry`)
        self.done = False
        self.status = 0  # of the last call
        self.waiting, self.seen, self.rooms = 0, 0, 0  # what a waiting node waits for (rooms: `Engine._drained`)
        self.failed = False  # set by `after` when it finds malformed input
        self.engine = None

    # -- set up ---------------------------------------------------------------------------------------
    def ports(self):
        """(input ports, output ports) in kernel order."""
        return self.ins, self.outs

    def check(self) -> None:
        """Raise NeedOracle when the node's parameters or inputs are beyond the kernel."""

    def out_dtype(self, port: str):
        return np.int64

    def out_tile(self, port: str):
        """Tile shape of an output stream, None for scalars."""
        return None

    def ctx(self):
        """An oracle context (no inputs) to evaluate parameters exactly as the oracle does."""
        return _Ctx(self.id, self.kind, self.params, self.arity, {}, self.tensors, self.hw)

    def mem(self) -> np.ndarray:
        """(hbm, channels, latency, startup) of the memory model for this node's kind."""
        hw = self.hw
        if not getattr(hw, "hbm", False) or self.kind not in MEMORY_KINDS:
            return NO_MEM
        values = (hw.hbm_channels, hw.hbm_latency, hw.hbm_startup)
        if (not all(isinstance(v, int) for v in values) or hw.hbm_channels <= 0
                or type(hw).memory_stall is not HwConfig.memory_stall
                or type(hw).final_stall is not HwConfig.final_stall):
            raise NeedOracle()
        return np.array((1,) + values, dtype=np.int64)

    def array(self, values, dtype):
        """`values` (a list or array of a stored tensor) as a numpy array, converted once per run."""
        key = (id(values), dtype)
        hit = self.cache.get(key)
        if hit is None or hit[0] is not values:
            hit = (values, np.asarray(values, dtype=dtype))
            self.cache[key] = hit
        return hit[1]

    def attach_inputs(self, in_ch: list, readers: list) -> None:
        """The channels of the input ports (in `ins` order) and this node's `channel.Reader` of
        each (`readers` holds their numbers)."""
        self.in_ch, self.readers, self._reader_objects = in_ch, [x.index for x in readers], readers
        self.check_bound()

    def attach_outputs(self, out_ch: list) -> None:
        self.out_ch = out_ch

    def check_bound(self) -> None:
        """Checks that need the input channels (their payload types)."""

    def invalidate(self) -> None:
        self._args = self._entry = None

    @staticmethod
    def cons_of(ch, reader: int) -> np.ndarray:
        """The consume-time array of reader number `reader` of channel `ch`."""
        return next(x.cons for x in ch.readers if x.index == reader)

    def reader_objects(self) -> list:
        """The `channel.Reader` of each input."""
        return self._reader_objects

    @staticmethod
    def gate_of(ch) -> np.ndarray | None:
        """Output channel `ch`'s gate: its one reader's consume times when the channel is bounded,
        else None."""
        return ch.readers[0].cons if ch.depth and len(ch.readers) == 1 else None

    def state(self):
        """The kernel's last argument: a NamedTuple of the runner's parameters and buffers (or the
        one value it needs), None when the kernel takes none."""
        return None

    def in_records(self) -> list:
        """An `In` per input port, in `ins` order."""
        return [In(ch.kind, ch.data, ch.sent, x.cons, ch.index, x.index, ch.lat)
                for ch, x in zip(self.in_ch, self.reader_objects())]

    def out_records(self) -> list:
        """An `Out` per output port, in `outs` order."""
        return [Out(ch.kind, ch.data, ch.sent, self.gate_of(ch) if self.backpressure else None, ch.index)
                for ch in self.out_ch]

    def port_args(self) -> tuple:
        """The kernel's port arguments: here an `In` per input, then an `Out` per output (a kernel
        over any number of lanes takes them as one tuple)."""
        return (*self.in_records(), *self.out_records())

    def records_args(self) -> tuple:
        """The kernel's arguments: `Node`, `port_args`, the state record."""
        tables = self.in_ch[0].tables if self.in_ch else self.out_ch[0].tables
        state = self.state()
        return (Node(self.S, self.F, tables.CH, tables.RD), *self.port_args()) + (() if state is None else (state,))

    def args(self) -> tuple:
        if self._args is None:
            self._args = self.records_args()
        return self._args

    # -- a deadlock's report ---------------------------------------------------------------------------
    def head(self, port: str):
        """(kind, data) of the next token on input `port`, None when none has been produced yet."""
        i = self.ins.index(port)
        ch = self.in_ch[i]
        cursor = int(ch.tables.RD[self.readers[i], 0])
        if cursor >= ch.produced:
            return None
        x = cursor - ch.base
        return int(ch.kind[x]), ch.data[x]

    def full(self, port: str) -> bool:
        """Whether output `port` was a full bounded channel when the graph deadlocked."""
        return self.out_ch[self.outs.index(port)].index in self.engine.full_channels

    def unsure(self, ports) -> list[str] | None:
        """The emits of a step that depend on a token not there yet: nothing to report when none of
        the outputs that it might emit on is full, else None (unknown)."""
        return None if any(self.full(p) for p in ports) else []

    def pending(self) -> tuple[list[str], list[str]] | None:
        """(input ports the next step reads, output ports it emits on, in the oracle's order) as
        far as they matter for a deadlock's report: a port whose head is there or whose channel
        has room may be listed or not. None when that depends on a token not produced yet. Here:
        every input and every output (a node whose steps read and emit the same ports)."""
        return list(self.ins), list(self.outs)

    # -- running --------------------------------------------------------------------------------------
    def call(self) -> int:
        """One kernel call, straight to the compiled function for the arguments' types; through
        numba's dispatcher only while that is not compiled or loaded yet (the dispatcher types
        every argument again, which for the records costs more than the lookup)."""
        entry = self._entry
        if entry is None or self._args is None:
            args = self.args()
            entry = compiled_entry(self.kernel, args)
            if entry is self.kernel:
                status = entry(*args)
                self._entry = compiled_entry(self.kernel, args)
                return status
            self._entry = entry
        return entry(*self._args)

    def after(self, before_in: list[int], before_out: list[int]) -> None:
        """Work on what a call consumed (inputs from before_in) and emitted (outputs from
        before_out, window positions): tile values, written tensors."""

    def grow(self) -> None:
        """Enlarge the state buffer a kernel asked for (GROW)."""
        raise AssertionError(f"n{self.id} {self.kind}: the kernel asked for more state")

    def release(self) -> None:
        """The run is over: give large state buffers to the pool (`pool`)."""

    def finish(self) -> dict:
        """What the node leaves besides its streams: {'level': Level} or {'vals': ...}."""
        return {}

    def counters(self) -> dict:
        out = counters(self.S)
        if self.tile is not None and out["flops"]:
            out["flops"] *= self.flops_scale()
        return out

    def flops_scale(self) -> int:
        return 1
