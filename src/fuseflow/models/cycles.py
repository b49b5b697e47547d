"""Cycles of a whole decoder model from the few decoders simulated (torch-free, so that studies
and suites load without torch).

    >>> model_cycles("unfused", [5, 5], simulated=1, layers=12)
    120
"""
from __future__ import annotations


def model_cycles(preset: str, kernel_cycles: list[int], simulated: int, layers: int) -> int:
    """Cycles of a `layers`-decoder model from a run of `simulated` decoders, as the reference's
    artifact aggregates its per-decoder runs: unfused and partial are per-decoder sums times the
    decoders (here: the simulated decoders' mean); fully fused (cross-layer) is the first LN+QKV
    + `layers` attentions + `layers - 1` tails fused with the next LN+QKV + the last tail.

        >>> model_cycles("partial", [10, 20, 30, 10, 20, 30], simulated=2, layers=12)
        720
        >>> model_cycles("full", [10, 20, 35, 20, 30], simulated=2, layers=12)
        665
    """
    kind = preset.split()[0].split("-")[0]
    if kind != "full":
        return round(sum(kernel_cycles) * layers / simulated)
    first, rest = kernel_cycles[0], kernel_cycles[1:]
    attention = rest[0::2]  # attention, tail(+next), attention, ..., last tail
    tails = rest[1::2]
    if len(attention) != simulated or len(tails) != simulated:
        raise ValueError(f"{len(kernel_cycles)} kernels do not make {simulated} cross-layer fused decoders")
    fused = tails[:-1]
    return round(first + layers * sum(attention) / simulated + (layers - 1) * sum(fused) / len(fused) + tails[-1])
