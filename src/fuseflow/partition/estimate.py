"""Stratified ratio estimation of a total from a sample of windows (the sampled mode's statistics).

A population of W windows has a cheap auxiliary value x_w each (the estimated work under the
window) and an expensive one y_w (its simulated cycles). Windows are stratified by x (strata of
equal total x, so heavy windows sit in their own strata), a sample is drawn per stratum, and
the total of y is the separate ratio estimator  Y = sum_h X_h * (sum y / sum x over the sample
of stratum h). Its variance per stratum is N_h^2 (1 - n_h/N_h) s_h^2 / n_h, with s_h^2 the
sample variance of the residuals y - R_h x; the 95% interval uses Student's t with
Satterthwaite's degrees of freedom. A stratum sampled whole contributes its exact total.

    >>> import numpy as np
    >>> x = np.arange(1, 101, dtype=float)
    >>> labels = stratify(x, 4)
    >>> picked = draw(labels, allocate(x, labels, 20), np.random.default_rng(0))
    >>> est = ratio_total(x, labels, picked, 3 * x[picked])
    >>> round(est.total), bool(est.low == est.high == est.total)
    (15150, True)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_PER_STRATUM = 2  # a stratum's variance needs two sampled windows


@dataclass
class RatioEstimate:
    """A total with its confidence interval (`low`, `high`) and what it was drawn from."""

    total: float
    low: float
    high: float
    sampled: int  # windows simulated
    population: int  # windows in all
    strata: int

    def __post_init__(self):
        self.total, self.low, self.high = float(self.total), float(self.low), float(self.high)

    @property
    def half_width(self) -> float:
        """Half the interval's width relative to the total (0.02 is +-2%)."""
        return (self.high - self.low) / 2 / self.total if self.total else 0.0


def stratify(x: np.ndarray, strata: int) -> np.ndarray:
    """A stratum label per window: windows sorted by x, cut into `strata` groups of about equal
    total x (each at least MIN_PER_STRATUM windows; fewer strata when there are few windows)."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    strata = max(1, min(strata, len(x) // MIN_PER_STRATUM))
    cumulative = np.cumsum(x[order])
    total = cumulative[-1] if len(x) else 0.0
    if total > 0:
        cuts = np.searchsorted(cumulative, total * np.arange(1, strata) / strata)
    else:
        cuts = len(x) * np.arange(1, strata) // strata
    bounds = [0, *sorted(set(int(c) for c in cuts)), len(x)]
    groups: list[tuple[int, int]] = []
    for lo, hi in ((a, b) for a, b in zip(bounds, bounds[1:]) if b > a):
        if groups and (hi - lo < MIN_PER_STRATUM or groups[-1][1] - groups[-1][0] < MIN_PER_STRATUM):
            groups[-1] = (groups[-1][0], hi)  # too small to estimate a variance: joins its neighbour
        else:
            groups.append((lo, hi))
    labels = np.zeros(len(x), dtype=np.int64)
    for label, (lo, hi) in enumerate(groups):
        labels[order[lo:hi]] = label
    return labels


def allocate(x: np.ndarray, labels: np.ndarray, n: int) -> dict[int, int]:
    """Windows to draw per stratum: `n` dealt in proportion to the strata's total x (at least
    MIN_PER_STRATUM each, at most the stratum)."""
    x = np.asarray(x, dtype=np.float64)
    strata = np.unique(labels)
    sizes = {int(h): int((labels == h).sum()) for h in strata}
    weights = np.array([x[labels == h].sum() for h in strata]) + 1e-12
    share = n * weights / weights.sum()
    return {int(h): int(min(sizes[int(h)], max(MIN_PER_STRATUM, round(s)))) for h, s in zip(strata, share)}


def draw(labels: np.ndarray, counts: dict[int, int], rng: np.random.Generator) -> np.ndarray:
    """Indices of windows drawn without replacement, `counts[h]` from stratum h, sorted."""
    picked = [rng.choice(np.flatnonzero(labels == h), size=k, replace=False) for h, k in counts.items()]
    return np.sort(np.concatenate(picked)) if picked else np.zeros(0, dtype=np.int64)


def _t_quantile(df: float, confidence: float) -> float:
    from scipy.stats import t  # noqa: PLC0415 - scipy.stats loads slowly; only intervals need it

    return float(t.ppf(0.5 + confidence / 2, df))


def ratio_total(x: np.ndarray, labels: np.ndarray, picked: np.ndarray, y: np.ndarray,
                confidence: float = 0.95) -> RatioEstimate:
    """The separate ratio estimate of sum(y) over every window from the `picked` windows' y."""
    x, y, picked = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64), np.asarray(picked)
    total, variance, df_terms = 0.0, 0.0, []
    for h in np.unique(labels):
        members = labels == h
        in_sample = members[picked]
        xs, ys = x[picked][in_sample], y[in_sample]
        size, n = int(members.sum()), int(in_sample.sum())
        if n == size:  # sampled whole: exact
            total += float(ys.sum())
            continue
        if n == 0:
            raise ValueError(f"stratum {h} has no sampled window")
        ratio = ys.sum() / xs.sum() if xs.sum() > 0 else 0.0
        mean_y = ys.mean() if xs.sum() <= 0 else None
        total += ratio * x[members].sum() if mean_y is None else mean_y * size
        residuals = ys - (ratio * xs if mean_y is None else mean_y)
        term = size ** 2 * (1 - n / size) * (residuals.var(ddof=1) if n > 1 else 0.0) / n
        variance += term
        df_terms.append((term, n - 1))
    if variance <= 0:
        return RatioEstimate(total, total, total, len(picked), len(x), len(np.unique(labels)))
    df = variance ** 2 / sum(v ** 2 / d for v, d in df_terms if d > 0 and v > 0)
    half = _t_quantile(df, confidence) * np.sqrt(variance)
    return RatioEstimate(total, total - half, total + half, len(picked), len(x), len(np.unique(labels)))
