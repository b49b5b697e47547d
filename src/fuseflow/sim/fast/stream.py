"""Token streams as arrays, the fast engine's data: `Arr`, the token-kind codes, conversions.

    >>> arr = from_tokens("3 S0 D", times=[1, 2, 5])
    >>> arr.kind.tolist(), arr.data.tolist(), arr.time.tolist()
    ([0, 1, 3], [3, 0, 0], [1, 2, 5])
    >>> to_tokens(arr)
    [Val(3), Stop(0), D]
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..tiles import Tile
from ..tokens import Done, Empty, Repeat, Stop, Val, as_tokens

VAL, STOP, EMPTY, DONE, REPEAT = 0, 1, 2, 3, 4


class Arr:
    """One stream: token kinds, payloads (Val data or Stop levels; don't-care for `N`, `D`, `R`),
    the step time at which the producer sent each token, and the producer's latency (a token is
    visible at sent + lat); `tiles`: the table that tile ids (Val data) index, if any."""

    __slots__ = ("kind", "data", "sent", "lat", "tiles")

    def __init__(self, kind, data, sent, lat=0, tiles=None):
        self.kind, self.data, self.sent, self.lat, self.tiles = kind, data, sent, int(lat), tiles

    def __len__(self) -> int:
        return self.kind.shape[0]

    @property
    def time(self) -> np.ndarray:
        """Visible times."""
        return self.sent + self.lat if self.lat else self.sent


def from_tokens(tokens, times=None, dtype=None, lat: int = 0) -> Arr:
    """An `Arr` of a token list (or text) and its visible times; float data if any `Val` holds a
    float (or `dtype`)."""
    toks = as_tokens(tokens)
    n = len(toks)
    kind = np.empty(n, dtype=np.int8)
    xs = [0] * n
    is_float = False
    tiles = []
    for i, tok in enumerate(toks):
        if isinstance(tok, Val) and isinstance(tok.x, Tile):
            kind[i] = VAL
            xs[i] = float(len(tiles))
            tiles.append(tok.x.a)
            is_float = True
        elif isinstance(tok, Val):
            kind[i] = VAL
            xs[i] = tok.x
            if isinstance(tok.x, float):
                is_float = True
        elif isinstance(tok, Stop):
            kind[i] = STOP
            xs[i] = tok.n
        elif tok is Empty:
            kind[i] = EMPTY
        elif tok is Done:
            kind[i] = DONE
        elif tok is Repeat:
            kind[i] = REPEAT
        else:
            raise TypeError(f"not a token: {tok!r}")
    if dtype is None:
        dtype = np.float64 if is_float else np.int64
    data = np.array(xs, dtype=dtype) if n else np.zeros(0, dtype=dtype)
    time = np.zeros(n, dtype=np.int64) if times is None else np.asarray(list(times), dtype=np.int64)
    if time.shape[0] != n:
        raise ValueError(f"{n} tokens, {time.shape[0]} times")
    return Arr(kind, data, time - lat if lat else time, lat, np.stack(tiles) if tiles else None)


_SINGLE = {EMPTY: Empty, DONE: Done, REPEAT: Repeat}


def token_list(kind: np.ndarray, data: np.ndarray, tiles: np.ndarray | None) -> list:
    """The oracle's tokens of token arrays (tiles aligned with the tokens, or None)."""
    out = []
    for i, (k, x) in enumerate(zip(kind.tolist(), data.tolist())):
        if k == VAL:
            out.append(Val(Tile(tiles[i])) if tiles is not None else Val(x))
        elif k == STOP:
            out.append(Stop(int(x)))
        else:
            out.append(_SINGLE[k])
    return out


def to_tokens(arr: Arr) -> list:
    """The oracle's tokens of a stream (ints for int data, floats for float data)."""
    out = []
    append = out.append
    for k, x in zip(arr.kind.tolist(), arr.data.tolist()):
        if k == VAL and arr.tiles is not None:
            append(Val(Tile(arr.tiles[int(x)])))
        elif k == VAL:
            append(Val(x))
        elif k == STOP:
            append(Stop(int(x)))
        else:
            append(_SINGLE[k])
    return out


@njit(cache=True)
def _is_elem(k):
    return k == VAL or k == EMPTY
