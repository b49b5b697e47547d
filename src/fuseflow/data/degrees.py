"""Power-law expected degrees fitted to a graph's published degree statistics (for Chung–Lu twins).

The synthetic generator (`synthetic.py`) gives node i (ranked by weight) the weight
w_i = (i + offset·N)^-alpha and draws edges with endpoints ∝ weight, after one edge per node (so no
node is isolated). Node i's degree is then 1 + Poisson(λ_i) with λ_i = (mean degree - 1) · w_i /
mean(w), which gives in closed form:

- mean degree: the published mean (the edge count fixes it);
- degree variance: Var(λ) + mean(λ);
- expected maximum degree: E[max_i (1 + Poisson(λ_i))], over the 256 heaviest nodes (the others
  do not reach the top).

`fit_power_law` finds (alpha, offset) that hit a published standard deviation and maximum: for each
alpha the offset that gives the maximum (bisection: a larger offset flattens the top), and alpha
that gives the standard deviation (a larger alpha steepens the tail). The fitted numbers are
recorded in `synthetic.SPECS`; docs/datasets.md has the fit and what the generator achieves.

    >>> shape = PowerLaw(alpha=0.75, offset=1e-3)
    >>> [round(x, 1) for x in expected_degrees(shape, 10_000, 100_000)]
    [10.0, 19.4, 458.0]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TOP = 256  # heaviest nodes that decide the expected maximum


@dataclass(frozen=True)
class PowerLaw:
    """Expected degree of the node of rank i ∝ (i + offset·N)^-alpha (degree exponent
    γ = 1 + 1/alpha); `offset` is relative to the node count N, so a scaled graph keeps the
    shape of the distribution."""

    alpha: float
    offset: float

    @property
    def gamma(self) -> float:
        return 1.0 + 1.0 / self.alpha


@dataclass(frozen=True)
class DegreeTarget:
    """Published statistics of a graph's (out-)degrees: N, stored edges, standard deviation and
    maximum."""

    nodes: int
    stored_edges: int
    std: float
    max_degree: float

    @property
    def mean(self) -> float:
        return self.stored_edges / self.nodes


def weights(shape: PowerLaw, n: int) -> np.ndarray:
    """The n weights in rank order (largest first), normalised to mean 1."""
    w = (np.arange(n, dtype=np.float64) + shape.offset * n + 1.0) ** -shape.alpha
    return w / w.mean()


def expected_degrees(shape: PowerLaw, n: int, stored_edges: int) -> tuple[float, float, float]:
    """(mean, standard deviation, expected maximum) of the degrees the generator draws with
    `shape` on n nodes and `stored_edges` directed entries (the model in the module docstring)."""
    from scipy.special import pdtr  # noqa: PLC0415 - scipy.special loads slowly; only fits need it

    mean = stored_edges / n
    lam = weights(shape, n) * (mean - 1.0)
    top = lam[:TOP]
    peak = float(top[0])
    low = int(max(0.0, peak - 6.0 * np.sqrt(peak)))
    x = np.arange(low, int(peak + 10.0 * np.sqrt(peak) + 20.0))
    # P(max <= x) = Π_i P(1 + Poisson(λ_i) <= x), in logs for the product of many factors near 1
    log_cdf = np.sum(np.log(np.maximum(pdtr(np.maximum(x[:, None] - 1, 0), top[None, :]), 1e-300)), axis=1)
    log_cdf[x < 1] = -np.inf
    expected_max = low + float(np.sum(1.0 - np.exp(log_cdf)))
    return mean, float(np.sqrt(lam.var() + lam.mean())), expected_max


def _bisect(f, low: float, high: float, steps: int = 40) -> float:
    """x in [low, high] where the increasing function f crosses 0."""
    for _ in range(steps):
        mid = (low + high) / 2
        low, high = (mid, high) if f(mid) < 0 else (low, mid)
    return (low + high) / 2


def fit_power_law(target: DegreeTarget) -> PowerLaw:
    """The power law whose expected degrees have `target`'s standard deviation and maximum.

    >>> fit = fit_power_law(DegreeTarget(10_000, 100_000, 17.0, 400.0))
    >>> round(fit.alpha, 2), [round(x) for x in expected_degrees(fit, 10_000, 100_000)]
    (0.7, [10, 17, 400])
    """
    n, edges = target.nodes, target.stored_edges

    def offset_for(alpha: float) -> float:  # log10 offset giving the maximum (max falls as it grows)
        return _bisect(lambda lg: target.max_degree - expected_degrees(PowerLaw(alpha, 10 ** lg), n, edges)[2],
                       -9.0, 0.0, 30)

    alpha = _bisect(lambda a: expected_degrees(PowerLaw(a, 10 ** offset_for(a)), n, edges)[1] - target.std,
                    0.3, 2.0, 25)
    return PowerLaw(round(alpha, 4), float(f"{10 ** offset_for(round(alpha, 4)):.4g}"))
