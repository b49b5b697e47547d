"""Stratified regression estimation of a total from a sample of windows (the sampled mode's statistics).

A population of W windows has a cheap auxiliary value x_w each (the heuristic's estimate of the
window) and an expensive one y_w (its simulated cycles). Windows are stratified by x (strata of
equal total x, so heavy windows sit in their own strata), a sample is drawn per stratum, and
the total of y is the combined regression estimator  Y = sum_h N_h (ybar_h + b (Xbar_h - xbar_h))
with one slope b fitted over the whole sample. Its variance per stratum is N_h^2 (1 - n_h/N_h) s_h^2 / n_h,
with s_h^2 the sample variance of the residuals (at least their variance relative to the
stratum's mean x, pooled over the strata, times its mean x squared: two windows of a stratum can
agree by chance); the 95% interval uses Student's t with
Satterthwaite's degrees of freedom (less one for the slope). A stratum sampled whole contributes
its exact total; strata of one draw each share their variance with their neighbours in x
(collapsed strata, `_collapsed`). (A ratio estimator, y through the origin, was biased where every window pays a
constant and where x says little about y; the regression tends to the stratified mean there.)

    >>> import numpy as np
    >>> x = np.arange(1, 101, dtype=float)
    >>> labels = stratify(x, 4)
    >>> picked = draw(labels, allocate(x, labels, 20), np.random.default_rng(0))
    >>> est = regression_total(x, labels, picked, 3 * x[picked] + 7)
    >>> round(est.total), bool(est.low == est.high == est.total)
    (15850, True)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NORMAL_95 = 1.959964  # the standard normal's 97.5% quantile
MIN_PER_STRATUM = 2  # windows in a stratum at the least (a stratum of one would be a window taken whole)


@dataclass
class RatioEstimate:
    """A total with its confidence interval (`low`, `high`) and what it was drawn from."""

    total: float
    low: float
    high: float
    sampled: int  # windows simulated
    population: int  # windows in all
    strata: int
    quantile: float = 0.0  # Student's t quantile the interval used (0: no spread, the interval is exact)

    def __post_init__(self):
        self.total, self.low, self.high = float(self.total), float(self.low), float(self.high)

    def shifted(self, by: float, slack: float = 0.0) -> RatioEstimate:
        """This estimate and its interval moved by `by` (a part of the total known up to
        `slack`, which widens the interval on both sides)."""
        return RatioEstimate(self.total + by, self.low + by - slack, self.high + by + slack, self.sampled,
                             self.population, self.strata)

    @property
    def half_width(self) -> float:
        """Half the interval's width relative to the total (0.02 is +-2%)."""
        return (self.high - self.low) / 2 / self.total if self.total else 0.0

    @property
    def normal_half_width(self) -> float:
        """`half_width` as a large sample's normal quantile would make it: the spread alone, without
        the small sample's wider t (what a larger sample of the same spread would reach)."""
        return self.half_width * (NORMAL_95 / self.quantile) if self.quantile else self.half_width


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
    """Windows to draw per stratum: `n` dealt in proportion to the strata's total x (at least one
    each, at most the stratum; a stratum of one draw shares its variance with a neighbour:
    `regression_total`)."""
    x = np.asarray(x, dtype=np.float64)
    strata = np.unique(labels)
    sizes = {int(h): int((labels == h).sum()) for h in strata}
    weights = np.array([x[labels == h].sum() for h in strata]) + 1e-12
    share = n * weights / weights.sum()
    return {int(h): int(min(sizes[int(h)], max(1, round(s)))) for h, s in zip(strata, share)}


def draw(labels: np.ndarray, counts: dict[int, int], rng: np.random.Generator) -> np.ndarray:
    """Indices of windows drawn without replacement, `counts[h]` from stratum h, sorted."""
    picked = [rng.choice(np.flatnonzero(labels == h), size=k, replace=False) for h, k in counts.items()]
    return np.sort(np.concatenate(picked)) if picked else np.zeros(0, dtype=np.int64)


def _t_quantile(df: float, confidence: float) -> float:
    from scipy.stats import t  # noqa: PLC0415 - scipy.stats loads slowly; only intervals need it

    return float(t.ppf(0.5 + confidence / 2, df))


def _strata_sums(x, y, labels, picked):
    """Per stratum: (size, X_h, sampled x, sampled y); strata sampled whole are exact."""
    for h in np.unique(labels):
        members = labels == h
        in_sample = members[picked]
        yield int(members.sum()), float(x[members].sum()), x[picked][in_sample], y[in_sample]


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of y on x over the whole sample (strata are narrow in x: a slope
    fitted within them would rest on a few points each)."""
    if len(x) < 3:
        return 0.0
    dx = x - x.mean()
    sxx = float((dx ** 2).sum())
    return float((dx * (y - y.mean())).sum()) / sxx if sxx > 0 else 0.0


def regression_total(x: np.ndarray, labels: np.ndarray, picked: np.ndarray, y: np.ndarray,
                     confidence: float = 0.95) -> RatioEstimate:
    """The combined regression estimate of sum(y) over every window from the `picked` windows' y:
    per stratum N_h (mean y + b (mean x of the stratum - mean x of its sample)), one slope b fitted
    over the whole sample. Where y is proportional to x it is the ratio estimate; a
    per-window constant (a window's fill and drain) or an x that says little about y does not bias
    it (b then tends to 0: the stratified mean)."""
    x, y, picked = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64), np.asarray(picked)
    strata = [(size, big_x, xs, ys) for size, big_x, xs, ys in _strata_sums(x, y, labels, picked)]
    for size, _, xs, _ in strata:
        if len(xs) == 0 and size:
            raise ValueError("a stratum has no sampled window")
    partial = [(size, big_x, xs, ys) for size, big_x, xs, ys in strata if len(xs) < size]
    slope = _slope(np.concatenate([xs for _, _, xs, _ in partial] or [np.zeros(0)]),
                   np.concatenate([ys for _, _, _, ys in partial] or [np.zeros(0)]))
    total = sum(float(ys.sum()) for size, _, xs, ys in strata if len(xs) == size)
    total += sum(size * ys.mean() + slope * (big_x - size * xs.mean()) for size, big_x, xs, ys in partial)
    groups = _collapsed(partial)
    residuals = [(ys - ys.mean()) - slope * (xs - xs.mean()) for _, _, xs, ys in groups]
    dfs = sum(len(r) - 1 for r in residuals)
    scale = [max(float(xs.mean()), 1e-12) for _, _, xs, _ in groups]  # spread grows with the work: pooled relative
    pooled = sum(float(((r / m) ** 2).sum()) for r, m in zip(residuals, scale)) / dfs if dfs > 0 else 0.0
    fitted = dfs / (dfs - 1) if slope != 0 and dfs > 1 else 1.0  # the slope took one of the residuals' degrees
    variance, df_terms = 0.0, []
    for (size, _, xs, _), r, m in zip(groups, residuals, scale):
        n = len(xs)
        # a stratum of a few windows can show no spread by chance: at least the pooled spread
        own = float((r ** 2).sum()) / (n - 1) if n > 1 else 0.0
        term = size ** 2 * (1 - n / size) * max(own, pooled * m ** 2) * fitted / n
        variance += term
        df_terms.append((term, n - 1))
    count = len(strata)
    if variance <= 0:
        return RatioEstimate(total, total, total, len(picked), len(x), count)
    df = variance ** 2 / sum(v ** 2 / d for v, d in df_terms if d > 0 and v > 0)
    quantile = _t_quantile(max(1.0, df - (slope != 0)), confidence)  # the slope costs a degree
    half = quantile * np.sqrt(variance)
    return RatioEstimate(total, total - half, total + half, len(picked), len(x), count, quantile)


def _collapsed(partial: list) -> list:
    """The sampled strata as the variance sees them: a stratum of one draw shows no spread, so
    consecutive ones (neighbours in x) are taken together, two or more draws to a group (the
    collapsed-strata estimate: the difference between neighbours counts as spread, which errs wide).
    Each group: (windows, total x, sampled x, sampled y), as `_strata_sums` gives a stratum."""
    groups, pending = [], []
    for stratum in partial:
        if len(stratum[2]) > 1:
            groups.append(stratum)
            continue
        pending.append(stratum)
        if len(pending) == 2:
            groups.append(_merged(pending))
            pending = []
    if pending:  # a lone one left: it joins the group before it
        groups[-1:] = [_merged([*groups[-1:], pending[0]])]
    return groups


def _merged(strata: list) -> tuple:
    return (sum(s[0] for s in strata), sum(s[1] for s in strata), np.concatenate([s[2] for s in strata]),
            np.concatenate([s[3] for s in strata]))
