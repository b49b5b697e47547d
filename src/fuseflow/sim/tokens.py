"""Stream tokens and their one text form.

`Val(x)` carries a coordinate or reference (int) or a value (float); `Stop(n)` closes a fiber n
levels up from the innermost; `Empty` (text `N`) is a missing element; `Done` (text `D`) ends a
stream; `Repeat` (text `R`) is the repeat signal of `repsig` streams.

    >>> toks = parse_tokens("1 2.5 S0 N S1 R D")
    >>> toks
    [Val(1), Val(2.5), Stop(0), N, Stop(1), R, D]
    >>> format_tokens(toks)
    '1 2.5 S0 N S1 R D'
    >>> format_tokens([Val(3.0), Val(0.5), Val(-0.0), Val(float("-inf"))])
    '3 0.5 0 -inf'
    >>> Val(3) == Val(3.0), Empty is parse_tokens("N")[0]
    (True, True)
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable, Union

import numpy as np


@dataclass(frozen=True, slots=True)
class Val:
    x: Union[int, float]

    def __repr__(self) -> str:
        return f"Val({format_number(self.x)})"


@dataclass(frozen=True, slots=True)
class Stop:
    n: int

    def __repr__(self) -> str:
        return f"Stop({self.n})"


class _Singleton:
    __slots__ = ()
    text = "?"

    def __repr__(self) -> str:
        return self.text

    def __reduce__(self):  # pickling keeps the singleton
        return self.__class__.__name__.lstrip("_")


class _Empty(_Singleton):
    text = "N"


class _Done(_Singleton):
    text = "D"


class _Repeat(_Singleton):
    text = "R"


Empty = _Empty()
Done = _Done()
Repeat = _Repeat()

Token = Union[Val, Stop, _Empty, _Done, _Repeat]

_STOP = re.compile(r"S(\d+)$")
_INT = re.compile(r"[+-]?\d+$")
_SINGLETONS = {"N": Empty, "D": Done, "R": Repeat}


def format_number(x) -> str:
    """Compact text of a number: ints as is, integral floats without `.0`, others by repr."""
    if isinstance(x, bool):
        x = int(x)
    if isinstance(x, int):
        return str(x)
    if not isinstance(x, (float, np.floating)):
        return repr(x)  # a tile
    x = float(x)
    if math.isfinite(x) and x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return repr(x)


def token_text(tok: Token) -> str:
    if isinstance(tok, Val):
        return format_number(tok.x)
    if isinstance(tok, Stop):
        return f"S{tok.n}"
    if isinstance(tok, _Singleton):
        return tok.text
    raise TypeError(f"not a token: {tok!r}")


def format_tokens(tokens: Iterable[Token]) -> str:
    return " ".join(token_text(t) for t in tokens)


def parse_token(word: str) -> Token:
    if word in _SINGLETONS:
        return _SINGLETONS[word]
    m = _STOP.match(word)
    if m:
        return Stop(int(m.group(1)))
    if _INT.match(word):
        return Val(int(word))
    try:
        return Val(float(word))
    except ValueError:
        raise ValueError(f"not a token: {word!r} (use numbers, Sn, N, D, R)") from None


def parse_tokens(text: str) -> list[Token]:
    return [parse_token(w) for w in text.split()]


def as_tokens(tokens) -> list[Token]:
    """A token list from text or an iterable of tokens."""
    if isinstance(tokens, str):
        return parse_tokens(tokens)
    return list(tokens)


def is_elem(tok: Token) -> bool:
    """An element token: a `Val` or `Empty` (not a control token)."""
    return isinstance(tok, Val) or tok is Empty
