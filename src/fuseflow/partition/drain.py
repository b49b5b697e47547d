"""The drain of a kernel whose outer loop is a reduction, taken out of its sampled windows.

Such a kernel accumulates its outputs over the whole outer loop and writes them at the end: a
whole run writes each output value once, but every window run writes all the values its
coordinates touched, and a window's value (its run from `margin` coordinates early, less the
margin's run) keeps those its margin did not touch. Summed over the windows they count a value
once per window that touches it: measured on GCN's first layer over Cora in order k,i,j (247
windows), +52% over the whole run at a margin of 0, +50% at 6; the excess cycles were one per
value written in excess (to 0.1%).

So for such a kernel the sampled mode estimates the sum of the windows' cycles less `rate`
cycles per value each run writes (`KernelSetup.cycles_of`) and adds `rate` times the values a
whole run writes, counted from the kernel's ops on the inputs' patterns (`PartialSums.pattern_entries`).
`rate` is measured on two windows near the start, each run from a one-window margin and from the
loop's start (the exact value): the excess cycles over the excess values. Summed over all windows
the corrected values come within 0.5% (spmm_jik), 0.7% (GCN karate) of the whole run's cycles at
a margin of a few windows, against +4% to +17% uncorrected (measured on every window: docs/partitioned.md).

    >>> import fuseflow
    >>> from fuseflow.pipeline import prepared
    >>> from fuseflow.partition.partials import partial_sums
    >>> from fuseflow.partition.windows import kernel_setup, reference_values
    >>> p = fuseflow.from_mlir("tests/mlir/spmm_jik.mlir")
    >>> data, compiled = prepared(p, "full", None, 2, 0.3)
    >>> values = reference_values(p, data)
    >>> kernel = compiled.kernels[0]
    >>> d = measured_drain(kernel_setup(kernel, values), partial_sums(kernel, values), 3, None, "fast", None)
    >>> d.whole, 0.5 < d.rate < 2, d.slack >= 0
    (512, True, True)
"""
from __future__ import annotations

from dataclasses import dataclass

from ..sim.window import Window
from .partials import PartialSums
from .window_tasks import map_windows
from .windows import KernelSetup

CALIBRATION_WINDOWS = (2, 3)  # windows whose excess drain measures the rate (each from a one-window margin)
DEFAULT_RATE = 1.0  # cycles per value written, where no excess shows (the loop too short, or no value touched twice)
# the least uncertainty of a measured rate, relative: GCN Cora k,i,j sampled (5 seeds, 7% of 247 windows) came
# out 0.007% to 0.023% below the whole run, 0.03% to 0.11% of the drain's cycles, with the two windows' rates equal
RATE_TOLERANCE = 1e-3


@dataclass(frozen=True)
class Drain:
    """Cycles a run spends per value its outputs write (`rate`, and how far the calibration
    windows' own rates lie from it, `spread`), and the values a whole run writes (`whole`)."""

    rate: float
    whole: int
    spread: float = 0.0

    @property
    def slack(self) -> float:
        """Cycles the total may be off by for the rate's uncertainty (`spread`, at least
        RATE_TOLERANCE of the rate) per value written once."""
        return max(self.spread, RATE_TOLERANCE * self.rate) * self.whole


def measured_drain(setup: KernelSetup, partials: PartialSums, width: int, hw, engine: str, client) -> Drain:
    """The drain of `setup`'s kernel for windows of `width` coordinates (see the module doc)."""
    whole = partials.pattern_entries()
    ks = [k for k in CALIBRATION_WINDOWS if (k + 1) * width <= setup.extent]
    if not ks:
        return Drain(DEFAULT_RATE, whole)
    jobs = []
    for k in ks:
        lo, hi = k * width, (k + 1) * width
        jobs += [Window(((lo - width, hi),)), Window(((lo - width, lo),)), Window(((0, hi),)), Window(((0, lo),))]
    runs = map_windows(setup, jobs, hw, engine, client)
    excess = []  # (cycles, values) written in excess of a whole run's, per calibration window
    for k in range(len(ks)):
        a, b, whole_hi, whole_lo = runs[4 * k:4 * k + 4]
        excess.append(((a.cycles - b.cycles) - (whole_hi.cycles - whole_lo.cycles),
                       (a.drained - b.drained) - (whole_hi.drained - whole_lo.drained)))
    cycles, values = (sum(e[i] for e in excess) for i in (0, 1))
    if values <= 0:
        return Drain(DEFAULT_RATE, whole)
    rate = max(0.0, cycles / values)
    return Drain(rate, whole, max(abs(c / v - rate) for c, v in excess if v > 0))
