"""Tile values in the streaming engine.

A channel of tiles keeps each token's tile beside it (`Channel.tiles[i]`), and a `Val` token's
data is its own absolute index in the stream. The kernels move tokens and give every timing,
count and stop, whatever the data; since timing never depends on values, the values are
computed here after each kernel call, for the tokens the call moved, with the same `sim.tiles`
functions the oracle calls on stacks of one (so the bits agree): ALU results as one stacked op,
reductions as folds in stream order (step k combines the k-th element of every fiber, the open
fiber's partial result carried to the next call), accumulators by replaying their event log.
Nodes that pass tokens on (repeat, joiners, broadcast, fork, join) copy the tiles their data
points at.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tiles import Tile
    >>> import numpy as np
    >>> t = [Tile(np.full((2, 2), x)) for x in (1.0, 2.0)]
    >>> from fuseflow.sim.tokens import Val, Stop, Done
    >>> run = apply("reduce", {"val": [Val(t[0]), Val(t[1]), Stop(0), Done]},
    ...             {"kind": "sum", "tile": {"b": 2, "in": [["i", "j"]], "out": ["i"]}})
    >>> run.outs["val"][0].x.a.tolist(), run.counters["flops"]
    ([6.0, 6.0], 8)
"""
from __future__ import annotations

from collections import deque

import numpy as np

from ..tiles import TileSpec
from .core import ACC, EMIT, SEAL
from .stream import EMPTY, STOP, VAL


def array_table(spec: TileSpec, vals, fill: float) -> np.ndarray:
    """Every stored tile over the node's axes, then the fill tile (number = stored tiles)."""
    stored = np.asarray(vals, dtype=np.float64)
    tiles = spec.read(stored.reshape((stored.shape[0], -1))) if stored.shape[0] else \
        np.zeros((0,) + spec.shape(spec.out))
    return np.concatenate([tiles, spec.full(1, fill)])


def _new_vals(ch, start: int) -> np.ndarray:
    """Window positions of the Val tokens from `start` on."""
    return start + np.nonzero(ch.kind[start:ch.count] == VAL)[0]


def _number(ch, where: np.ndarray) -> None:
    """Val data = the token's absolute index."""
    ch.data[where] = ch.base + where


def from_table(out, start: int, table: np.ndarray) -> None:
    """An array's tiles: its Val data numbers a stored tile."""
    where = _new_vals(out, start)
    out.tiles[where] = table[out.data[where].astype(np.int64)]
    _number(out, where)


def pass_through(src, out, start: int) -> None:
    """Tokens copied from `src`: their data is the absolute index of the token in `src`."""
    where = _new_vals(out, start)
    out.tiles[where] = src.tiles[out.data[where].astype(np.int64) - src.base]
    _number(out, where)


def join(runner, start: int) -> None:
    """join's output token e came from lane src[0, e], window position src[1, e]."""
    out = runner.out_ch[0]
    n = out.count - start
    lanes, pos = runner.src[0, :n], runner.src[1, :n]
    is_val = out.kind[start:start + n] == VAL
    for lane, ch in enumerate(runner.in_ch):
        pick = np.nonzero(is_val & (lanes == lane))[0]
        out.tiles[start + pick] = ch.tiles[pos[pick]]
    _number(out, start + np.nonzero(is_val)[0])


def _operand(ch, pos: np.ndarray, shape, empty: float = 0.0) -> np.ndarray:
    """The tiles of an input's tokens at `pos` (an `N` is a tile of `empty`)."""
    stack = np.full((pos.shape[0],) + tuple(shape), empty, dtype=np.float64)
    if ch.tiles is not None:
        has = ch.kind[pos] == VAL
        stack[has] = ch.tiles[pos[has]]
    return stack


def alu(runner, before_in, before_out) -> None:
    """An ALU's output token j came from its inputs' tokens at the same step (one per step)."""
    out, spec = runner.out_ch[0], runner.tile
    j0 = before_out[0]
    where = _new_vals(out, j0)
    op, scalar, pos = runner.op, runner.scalar, runner.pos
    if op == "const":
        out.tiles[where] = spec.full(where.shape[0], scalar)
    else:
        operands = [_operand(ch, p0 + (where - j0), spec.shape(axes), scalar if op == "coalesce" else 0.0)
                    for ch, p0, axes in zip(runner.in_ch, before_in, spec.ins)]
        out.tiles[where] = operands[0] if op == "coalesce" else spec.alu(op, operands, scalar, pos)
    _number(out, where)


def _elements(runner, ch, pos: np.ndarray) -> np.ndarray:
    """Input tokens at `pos` as the tiles a reducer combines (`N`: zeros; others unused)."""
    spec = runner.tile
    return spec.inner(_operand(ch, pos, spec.shape(spec.ins[0])), runner.params.get("kind", "sum"))


def _fold(spec, kind: str, tiles: np.ndarray, groups: list, init: np.ndarray) -> np.ndarray:
    """Each group's elements combined in order from its row of `init`, as the oracle does one by
    one: step k combines the k-th element of every group still that long."""
    acc = init.copy()
    longest = max((len(g) for g in groups), default=0)
    for k in range(longest):
        rows = np.array([r for r, g in enumerate(groups) if len(g) > k], dtype=np.int64)
        picks = np.array([groups[r][k] for r in rows], dtype=np.int64)
        acc[rows] = spec.combine(kind, acc[rows], tiles[picks])
    return acc


def reduce(runner, before_in, before_out) -> None:
    """A reducer's outputs: each `S0` closes the elements since the last one; the open fiber's
    partial result waits in `runner.partial` for the next call."""
    spec, kind = runner.tile, runner.params.get("kind", "sum")
    ch, out = runner.in_ch[0], runner.out_ch[0]
    p0, p1 = before_in[0], ch.cursor(runner.readers[0])
    kinds = ch.kind[p0:p1]
    is_elem = (kinds == VAL) | (kinds == EMPTY)
    closes = np.nonzero((kinds == STOP) & (ch.data[p0:p1] == 0))[0]
    group_of = np.searchsorted(closes, np.nonzero(is_elem)[0])  # elements after the last close: open
    groups = [[] for _ in range(closes.shape[0] + 1)]
    for e, g in enumerate(group_of.tolist()):
        groups[g].append(e)
    init = np.broadcast_to(spec.identity(kind), (len(groups),) + spec.shape(spec.out)).copy()
    partial = getattr(runner, "partial", None)
    if partial is not None:
        init[0] = partial
    acc = _fold(spec, kind, _elements(runner, ch, p0 + np.nonzero(is_elem)[0]), groups, init)
    runner.partial = acc[-1]
    where = _new_vals(out, before_out[0])
    out.tiles[where] = acc[:-1]
    _number(out, where)


def accumulate(runner, before_out) -> None:
    """Replay an accumulator's event log (ACC: combine the val token at a window position into
    the entry of (mid, inner) coordinate; EMIT: the entry's tile goes out at a position; SEAL: the
    entry joins the queue of finished ones; EMIT_SEALED: the oldest finished tile goes out)."""
    spec, kind = runner.tile, runner.params.get("kind", "sum")
    val_in, val_out = runner.in_ch[-1], runner.out_ch[-1]
    acc = runner.__dict__.setdefault("entries", {})
    sealed = runner.__dict__.setdefault("sealed", deque())
    nev = int(runner.S[runner.nev_slot])
    ev = runner.ev
    for q in range(nev):
        key = (int(ev[0, q]), int(ev[1, q]))
        slot = int(ev[2, q])
        if ev[3, q] == ACC:
            elem = _elements(runner, val_in, np.array([slot]))[0]
            acc[key] = spec.combine(kind, acc.get(key, spec.identity(kind)), elem)
        elif ev[3, q] == EMIT:
            val_out.tiles[slot] = acc.pop(key)
        elif ev[3, q] == SEAL:
            sealed.append(acc.pop(key))
        else:
            val_out.tiles[slot] = sealed.popleft()
    runner.S[runner.nev_slot] = 0
    _number(val_out, _new_vals(val_out, before_out[-1]))


def written(runner, before_in) -> None:
    """The tiles a value writer stores: one per `Val`/`N` (zeros) in order."""
    spec, ch = runner.tile, runner.in_ch[0]
    p0, p1 = before_in[0], ch.cursor(runner.readers[0])
    kinds = ch.kind[p0:p1]
    pos = p0 + np.nonzero((kinds == VAL) | (kinds == EMPTY))[0]
    if pos.shape[0]:
        runner.tiles.append(_operand(ch, pos, spec.shape(spec.out)))


def stacked(runner) -> list:
    """Every written tile, in order."""
    return list(np.concatenate(runner.tiles)) if runner.tiles else []
