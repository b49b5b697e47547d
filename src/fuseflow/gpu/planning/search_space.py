"""The search space (schedules x cluster shapes x block tiles) and pruning Rules 1-4.

Rule 5 (capacity) needs the analyzer and is applied in :mod:`fuseflow.gpu.planning.planner`.

    >>> from fuseflow.gpu.problem.benchmarks import GPT67B_EXAMPLE as g
    >>> c = count_rules_1_to_4(g)
    >>> c["original"], c["rule1"]
    (27514634240000, 114159375)
    >>> derived(2, 4, 2, 4), derived(2, 4, 2, 8)
    ((2, 2), (4, 1))
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..problem.chains import ATOM, Chain
from .loop_schedules import all_schedules, rule3_ok, rule4_ok

CLUSTER_SIZES = (1, 2, 4, 8, 16)


def derived(cm: int, cn: int, ck: int, cl: int) -> tuple[int, int]:
    """(cls_shuffle, cls_reduce) = (cls_l / cls_k, cls_n * cls_k / cls_l)."""
    return cl // ck, cn * ck // cl


def tile_choices(extent: int) -> list[int]:
    """Rule 1: multiples of the 16-wide atom that divide the (padded) extent.

    >>> tile_choices(416), len(tile_choices(16384))
    ([16, 32, 208, 416], 11)
    """
    return [t for t in range(ATOM, extent + 1, ATOM) if extent % t == 0]


def cluster_ok(cm: int, cn: int, ck: int, cl: int, strategy: str, max_cluster: int = 16) -> bool:
    """Tile-independent part of Rule 2: at most max_cluster blocks (cls_m*cls_n*cls_k, the same
    count in GEMM1's view cls_m*cls_l*cls_reduce); cls_shuffle = cls_l/cls_k is a whole number that
    divides cls_n; the gated spatial strategy uses cls_k = 2 for its two branches.

    >>> sum(cluster_ok(*c, "standard") for c in itertools.product(CLUSTER_SIZES, repeat=4))
    70
    """
    if cm * cn * ck > max_cluster or cl < ck or cl % ck or cn % (cl // ck):
        return False
    return ck == 2 if strategy == "spatial" else True


def rule2_size_only(max_cluster: int = 16) -> int:
    """Cluster configs with cls_m*cls_n*cls_k <= max_cluster (the spec's 175 of 625).

    >>> rule2_size_only()
    175
    """
    return sum(cm * cn * ck <= max_cluster for cm, cn, ck, _ in itertools.product(CLUSTER_SIZES, repeat=4))


@dataclass
class Candidates:
    """Parallel int64 arrays, one row per (cluster shape, block tile) that passes Rules 1-2."""

    cm: np.ndarray
    cn: np.ndarray
    ck: np.ndarray
    cl: np.ndarray
    bm: np.ndarray
    bn: np.ndarray
    bk: np.ndarray
    bl: np.ndarray

    def __len__(self) -> int:
        return len(self.cm)

    def take(self, index) -> "Candidates":
        return Candidates(*(getattr(self, f)[index] for f in FIELDS))

    def row(self, i: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return (tuple(int(getattr(self, f)[i]) for f in FIELDS[:4]),
                tuple(int(getattr(self, f)[i]) for f in FIELDS[4:]))

    @staticmethod
    def single(cls: tuple, blk: tuple) -> "Candidates":
        return Candidates(*(np.array([v], dtype=np.int64) for v in (*cls, *blk)))


FIELDS = ("cm", "cn", "ck", "cl", "bm", "bn", "bk", "bl")


def candidates(chain: Chain, strategy: str, max_cluster: int = 16) -> Candidates:
    """All (cls, blk) rows passing Rule 1 and Rule 2 (incl. cluster tiles dividing the extents)."""
    P = chain.padded
    choices = [np.array(tile_choices(p), dtype=np.int64) for p in P]
    grids = np.meshgrid(*choices, indexing="ij")
    tiles = [g.ravel() for g in grids]
    cols = {f: [] for f in FIELDS}
    kk_split = strategy != "spatial"
    for cm, cn, ck, cl in itertools.product(CLUSTER_SIZES, repeat=4):
        if not cluster_ok(cm, cn, ck, cl, strategy, max_cluster):
            continue
        ck_split = ck if kk_split else 1
        keep = ((P[0] % (cm * tiles[0]) == 0) & (P[1] % (cn * tiles[1]) == 0)
                & (P[2] % (ck_split * tiles[2]) == 0) & (P[3] % (cl * tiles[3]) == 0))
        n = int(keep.sum())
        for f, v in zip(FIELDS[:4], (cm, cn, ck, cl)):
            cols[f].append(np.full(n, v, dtype=np.int64))
        for f, t in zip(FIELDS[4:], tiles):
            cols[f].append(t[keep])
    return Candidates(*(np.concatenate(cols[f]) if cols[f] else np.zeros(0, np.int64) for f in FIELDS))


def count_rules_1_to_4(chain: Chain, max_cluster: int = 16, strategies=None) -> dict[str, int]:
    """Candidate counts: the original space and after each of Rules 1-4 (summed over strategies)."""
    strategies = strategies or chain.strategies
    P = chain.padded
    schedules = all_schedules()
    n3 = sum(rule3_ok(s) for s in schedules)
    n4 = sum(rule3_ok(s) and rule4_ok(s) for s in schedules)
    raw_tiles = math.prod(p // ATOM for p in P)
    r1_tiles = math.prod(len(tile_choices(p)) for p in P)
    n_cls = len(CLUSTER_SIZES) ** 4
    out = {"original": 0, "rule1": 0, "rule2": 0, "rule3": 0, "rule4": 0}
    for strategy in strategies:
        legal = len(candidates(chain, strategy, max_cluster))
        out["original"] += len(schedules) * n_cls * raw_tiles
        out["rule1"] += len(schedules) * n_cls * r1_tiles
        out["rule2"] += len(schedules) * legal
        out["rule3"] += n3 * legal
        out["rule4"] += n4 * legal
    return out


def legal_schedules():
    """The schedules that pass Rules 3 and 4 (five of the 41)."""
    return [s for s in all_schedules() if rule3_ok(s) and rule4_ok(s)]

