"""Formatting helpers for the CLI and docs.

    >>> fmt_bytes(3 * 2**20), fmt_bytes(1536), fmt_count(2.7515e13)
    ('3.00MiB', '1.50KiB', '2.7515e+13')
"""
from __future__ import annotations


def fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return f"{int(n)}B"


def fmt_count(n: float) -> str:
    return f"{n:.4e}" if n >= 1e5 else f"{int(n)}"
