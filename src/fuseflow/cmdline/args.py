"""Argument parsing with one-line errors, and the value types the commands share.

    >>> count("12"), fraction("0.5"), shape_items(["A=64x8"])
    (12, 0.5, {'A': (64, 8)})
    >>> count("²")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: '²' is not a whole number written in digits 0-9
    >>> shape_items(["A=0x6"])
    Traceback (most recent call last):
    fuseflow.errors.UserError: --shape: 'A=0x6' has a dimension below 1 (fix: write e.g. --shape A=64x64)
"""
from __future__ import annotations

import argparse
import math
import re

from ..errors import UserError
from ..memory import Budget, parse_size

MAX_COUNT = 2**62  # larger whole numbers are refused before they reach numpy's int64


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line, `PROG: error: WHAT (see PROG --help)`, exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def count(text: str) -> int:
    """A whole number >= 0 in ASCII digits (seeds, limits)."""
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number written in digits 0-9")
    value = int(text)
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"{text} is too large")
    return value


def positive(text: str) -> int:
    """A whole number >= 1."""
    value = count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def _real(text: str) -> float:
    try:
        value = float(text) if text.isascii() else float("nan")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def fraction(text: str) -> float:
    """A number in (0, 1] (densities)."""
    value = _real(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is outside (0, 1]")
    return value


def relative(text: str) -> float:
    """A share in (0, 1), as a fraction or a percentage: `0.02` or `2%` (target errors)."""
    value = _real(text[:-1]) / 100 if text.endswith("%") else _real(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text} is outside (0, 1) (0%, 100%)")
    return value


def positive_real(text: str) -> float:
    """A finite number > 0 (scales, token limits)."""
    value = _real(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be positive")
    return value


def size(text: str) -> int:
    """Bytes of a memory size such as 4G or 512M."""
    try:
        return parse_size(text)
    except UserError as err:
        raise argparse.ArgumentTypeError(err.what) from None


def shape_items(items, flag: str = "--shape") -> dict[str, tuple[int, ...]]:
    """`NAME=AxB` items as {name: shape} (`?=N`: one size for every dynamic dimension, as {"?": N});
    every dimension a whole number >= 1, each name once."""
    shapes = {}
    for item in items or []:
        name, sep, dims = str(item).partition("=")
        parts = dims.lower().split("x")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*|\?", name) or name == "?" and len(parts) != 1 or \
                not all(p.isascii() and p.isdigit() and len(p) < 19 for p in parts):
            raise UserError(f"{item!r} is not NAME=AxB with whole numbers", flag, f"write e.g. {flag} A=64x64")
        shape = tuple(int(p) for p in parts)
        if min(shape) < 1:
            raise UserError(f"{item!r} has a dimension below 1", flag, f"write e.g. {flag} A=64x64")
        if name in shapes:
            raise UserError(f"{name} is given twice", flag, "give each input's shape once")
        shapes[name] = shape[0] if name == "?" else shape
    return shapes


def format_items(items) -> dict[str, str]:
    """`NAME=LEVELS` items (`--format A=dense,compressed`) as {name: levels}."""
    formats = {}
    for item in items or []:
        name, sep, fmt = str(item).partition("=")
        if not sep or not name or not fmt:
            raise UserError(f"--format {item!r} is not NAME=LEVELS", "command line",
                            "write e.g. --format A=dense,compressed")
        if name in formats:
            raise UserError(f"{name} is given twice", "--format", "give each input's format once")
        formats[name] = fmt
    return formats


def budget_of(args) -> Budget | None:
    """The memory budget `--max-memory` sets (None: what the machine has available)."""
    return Budget(args.max_memory) if args.max_memory else None
