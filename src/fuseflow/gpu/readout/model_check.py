"""The cost model against measurements: rank correlation per chain, where the model is most wrong, and a
fit of the bandwidths the model cannot know (L2, DSM per cluster size) written as a device file.

The fit reads each measured kernel as a lower bound on the bandwidth of every level it used: a kernel
that moved V bytes through a level in t seconds with a share s of that level's throughput shows the
level delivers at least V / (t s). The fitted bandwidth is the largest such bound over the kernels
(tight for the kernels that level actually bounds).

    >>> obs = [Observation("X", 1, {"l2": 6e6, "dsm": 0}, 2, 1.0, 1e-6, 2e-6),
    ...        Observation("X", 2, {"l2": 3e6, "dsm": 1e6}, 2, 0.5, 2e-6, 3e-6)]
    >>> fit_bandwidths(obs, mem_saturation=0.5)["bw_l2"].value
    3000000000000.0
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..problem.device import Device

FIT_LEVELS = ("l2", "dsm")


@dataclass(frozen=True)
class Observation:
    """One measured plan: modelled volumes, cluster size, occupancy, predicted and measured seconds."""

    chain: str
    rank: int
    volumes: dict
    cluster_size: int
    occupancy: float
    predicted_s: float
    measured_s: float

    @property
    def log_ratio(self) -> float:
        """log(measured / predicted): positive when the kernel is slower than the model says."""
        return math.log(self.measured_s / self.predicted_s)


@dataclass(frozen=True)
class RankCorrelation:
    chain: str
    plans: int
    tau: float
    pvalue: float


@dataclass(frozen=True)
class FittedValue:
    value: float
    kernels: int        # measured kernels that gave a bound
    from_chain: str     # the chain and rank of the kernel that set it
    from_rank: int


def rank_correlations(observations) -> list[RankCorrelation]:
    """Kendall tau between predicted and measured time over each chain's measured plans (3 or more)."""
    from scipy.stats import kendalltau  # noqa: PLC0415 - scipy is needed only here, after a measurement
    by_chain: dict[str, list[Observation]] = {}
    for o in observations:
        by_chain.setdefault(o.chain, []).append(o)
    out = []
    for chain, obs in by_chain.items():
        if len(obs) < 3:
            continue
        res = kendalltau([o.predicted_s for o in obs], [o.measured_s for o in obs])
        out.append(RankCorrelation(chain, len(obs), float(res.statistic), float(res.pvalue)))
    return out


def most_wrong(observations, count: int = 5) -> list[Observation]:
    """The plans whose measured time is furthest from the prediction (by |log ratio|)."""
    return sorted(observations, key=lambda o: -abs(o.log_ratio))[:count]


def fit_bandwidths(observations, mem_saturation: float = 0.5) -> dict[str, FittedValue]:
    """Fitted ``bw_l2`` and ``bw_dsm_<size>`` (bytes/s) from the measured kernels that used each level."""
    best: dict[str, FittedValue] = {}
    for o in observations:
        for level in FIT_LEVELS:
            volume = o.volumes.get(level, 0)
            if volume <= 0 or (level == "dsm" and o.cluster_size < 2):
                continue
            share = min(1.0, o.occupancy / mem_saturation) if level == "l2" else o.occupancy
            bound = volume / (o.measured_s * share)
            key = "bw_l2" if level == "l2" else f"bw_dsm_{o.cluster_size}"
            old = best.get(key)
            count = (old.kernels if old else 0) + 1
            if old is None or bound > old.value:
                best[key] = FittedValue(bound, count, o.chain, o.rank)
            else:
                best[key] = FittedValue(old.value, count, old.from_chain, old.from_rank)
    return best


def device_toml(name: str, base: Device, fitted: dict[str, FittedValue], measured: dict[str, float]) -> str:
    """A device file (TOML) for ``fuseflow gpu plan --device``: H100 defaults, the fields read off the
    GPU (``measured``: e.g. sms, l2_bytes, bw_global) and the fitted bandwidths, each with its source."""
    lines = [f'# {name}: fitted by `fuseflow gpu bench --run` from measured fused kernels (see docs/gpu.md)',
             f'name = "{name}"']
    for key, value in measured.items():
        lines.append(f"{key} = {value!r}  # read off the GPU")
    if "bw_l2" in fitted:
        f = fitted["bw_l2"]
        lines.append(f"bw_l2 = {f.value:.4g}  # fitted: largest bound of {f.kernels} kernels "
                     f"({f.from_chain} #{f.from_rank})")
    lines.append("[bw_dsm]")
    for size in sorted(base.bw_dsm):
        f = fitted.get(f"bw_dsm_{size}")
        if f:
            lines.append(f'"{size}" = {f.value:.4g}  # fitted over {f.kernels} kernels ({f.from_chain} #{f.from_rank})')
        else:
            lines.append(f'"{size}" = {base.bw_dsm[size]:.4g}  # H100 default: no measured kernel had clusters of '
                         f'{size}')
    return "\n".join(lines) + "\n"
