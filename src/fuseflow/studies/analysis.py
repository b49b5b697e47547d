"""How well the heuristic ranks schedules, and what pruning on it saves, measured on sweep rows.

Rows are grouped by (program, data point, seed): schedules are only compared with schedules of
the same program on the same data. For each group with simulated rows:

- Spearman rank correlation between estimated and simulated cycles (`scipy.stats.spearmanr`);
- for a pruning factor F: the schedules whose estimate exceeds F x the group's best estimate are
  skipped; *saved* counts them, *kept best* says whether the fastest simulated schedule survives.

    >>> rows = [ResultRow(s, program="p", data="d", seed=0, cycles=c, est_cycles=e) for s, c, e in
    ...         [("a", 100, 90), ("b", 300, 280), ("c", 900, 1000), ("d", 120, 150)]]
    >>> g = groups(rows)[0]
    >>> round(g.spearman, 2), g.best
    (1.0, 'a')
    >>> p = prune_stats(rows, 2.0)
    >>> p.total, p.saved, p.kept_best, p.groups
    (4, 2, 1, 1)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .row import ResultRow


@dataclass
class Group:
    program: str
    data: str
    seed: int
    rows: list[ResultRow] = field(default_factory=list)

    @property
    def key(self) -> tuple:
        return (self.program, self.data, self.seed)

    @property
    def simulated(self) -> list[ResultRow]:
        return [r for r in self.rows if r.status == "ok" and r.cycles is not None and r.est_cycles is not None]

    @property
    def spearman(self) -> float:
        rows = self.simulated
        if len(rows) < 3:
            return math.nan
        cycles = [r.cycles for r in rows]
        est = [r.est_cycles for r in rows]
        if len(set(cycles)) < 2 or len(set(est)) < 2:
            return math.nan
        from scipy.stats import spearmanr  # noqa: PLC0415 - scipy.stats is slow to import; only rank statistics need it

        return float(spearmanr(est, cycles).statistic)

    @property
    def best(self) -> str | None:
        rows = self.simulated
        return min(rows, key=lambda r: r.cycles).schedule if rows else None


def groups(rows: list[ResultRow]) -> list[Group]:
    out: dict[tuple, Group] = {}
    for r in rows:
        key = (r.program, r.data, r.seed)
        out.setdefault(key, Group(*key)).rows.append(r)
    return list(out.values())


@dataclass
class PruneStats:
    factor: float
    groups: int = 0  # groups with every schedule simulated (needed to judge pruning)
    total: int = 0  # schedules in those groups
    saved: int = 0  # simulations pruning would skip
    kept_best: int = 0  # groups whose fastest schedule survives pruning
    worst_loss: float = 0.0  # largest slowdown of the best surviving schedule vs the true best

    @property
    def saved_share(self) -> float:
        return self.saved / self.total if self.total else 0.0


def prune_stats(rows: list[ResultRow], factor: float) -> PruneStats:
    """What `--prune factor` would have done on fully simulated groups."""
    stats = PruneStats(factor)
    for g in groups(rows):
        sim = g.simulated
        if len(sim) < 2 or len(sim) != len([r for r in g.rows if r.status != "error"]):
            continue  # groups with pruned rows cannot be judged
        best_est = min(r.est_cycles for r in sim)
        kept = [r for r in sim if r.est_cycles <= factor * best_est]
        true_best = min(r.cycles for r in sim)
        kept_best = min(r.cycles for r in kept)
        stats.groups += 1
        stats.total += len(sim)
        stats.saved += len(sim) - len(kept)
        stats.kept_best += kept_best == true_best
        stats.worst_loss = max(stats.worst_loss, kept_best / true_best - 1 if true_best else 0.0)
    return stats


def pooled_spearman(rows: list[ResultRow]) -> float:
    """Spearman over the ranks within each group (each group's estimates and cycles turned into
    within-group ranks first), so that larger problems do not inflate the correlation."""
    from scipy.stats import rankdata, spearmanr  # noqa: PLC0415 - scipy.stats is slow to import; only rank statistics need it

    est, cyc = [], []
    for g in groups(rows):
        sim = g.simulated
        if len(sim) < 3:
            continue
        n = len(sim)
        est += list(rankdata([r.est_cycles for r in sim]) / n)
        cyc += list(rankdata([r.cycles for r in sim]) / n)
    if len(est) < 3:
        return math.nan
    return float(spearmanr(est, cyc).statistic)


def summary_text(rows: list[ResultRow], factors=(1.25, 1.5, 2.0, 3.0)) -> str:
    """A plain-text report: per-group correlation, then pruning at each factor."""
    lines = [f"{'program':<34} {'data':<22} {'seed':>4} {'sim':>4} {'err':>4} {'prun':>4} "
             f"{'spearman':>8}  best schedule"]
    for g in groups(rows):
        sim = g.simulated
        errors = sum(r.status == "error" for r in g.rows)
        pruned = sum(r.status == "pruned" for r in g.rows)
        rho = g.spearman
        lines.append(f"{g.program[-34:]:<34} {g.data[:22]:<22} {g.seed:>4} {len(sim):>4} {errors:>4} {pruned:>4} "
                     f"{'-' if math.isnan(rho) else f'{rho:.3f}':>8}  {g.best or '-'}")
    valid = [g.spearman for g in groups(rows) if not math.isnan(g.spearman)]
    if valid:
        lines.append(f"mean within-group Spearman {sum(valid) / len(valid):.3f} over {len(valid)} groups "
                     f"(min {min(valid):.3f}); pooled within-group ranks {pooled_spearman(rows):.3f}")
    lines.append("")
    lines.append(f"{'prune factor':>12} {'groups':>6} {'schedules':>9} {'skipped':>8} {'share':>6} "
                 f"{'kept best':>9} {'worst loss':>10}")
    for f in factors:
        p = prune_stats(rows, f)
        lines.append(f"{f:>12g} {p.groups:>6} {p.total:>9} {p.saved:>8} {p.saved_share:>6.0%} "
                     f"{p.kept_best:>4}/{p.groups:<4} {p.worst_loss:>10.1%}")
    return "\n".join(lines)
