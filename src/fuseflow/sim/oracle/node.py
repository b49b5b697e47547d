"""Running one primitive on the oracle: the table of implementations (`IMPLS`), `NodeRun`, `apply`.

    >>> from fuseflow.sim.tokens import format_tokens
    >>> run = apply("repsig", {"crd": ("4 7 S0 D", [0, 5, 5, 6])})
    >>> format_tokens(run.outs["repsig"]), run.consumed["crd"], run.steps
    ('R R S0 D', [0, 5, 6, 7], 4)
"""
from __future__ import annotations

from dataclasses import dataclass

from ...sam.primitives import PRIMITIVES
from ..hw import HwConfig
from ..storage import Level
from ..tokens import Token, as_tokens
from .alu import _alu
from .context import _Chan, _Ctx
from .drop import _crd_drop
from .join import _joiner
from .lanes import _broadcast, _fork, _join
from .read import _array, _locate, _root, _scan
from .reduce import _reduce
from .repeat import _repeat, _repsig
from .spacc import _spacc, _spacc2
from .write import _level_write, _value_write

IMPLS = {
    "root": _root, "scan": _scan, "locate": _locate, "repsig": _repsig, "repeat": _repeat,
    "intersect": lambda c: _joiner(c, False), "union": lambda c: _joiner(c, True),
    "array": _array, "alu": _alu, "reduce": _reduce, "spacc": _spacc, "spacc2": _spacc2, "crd_drop": _crd_drop,
    "level_write": _level_write, "value_write": _value_write, "broadcast": _broadcast,
    "fork": _fork, "join": _join,
}
assert set(IMPLS) == set(PRIMITIVES), set(PRIMITIVES) ^ set(IMPLS)


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
