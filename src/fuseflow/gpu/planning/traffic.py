"""Dataflow analyzer: bytes moved at each memory level by a fused plan, for many candidates at once.

Everything is a closed form over numpy arrays (one row per candidate). The execution model these
formulas count is spelled out in docs/gpu.md ("Execution model") and executed literally, copy by
copy, by :mod:`fuseflow.gpu.emulation.plan_emulator`; tests assert both give identical byte counts.

    >>> from fuseflow.gpu.problem.chains import Chain
    >>> from fuseflow.gpu.planning.loop_schedules import parse_schedule
    >>> from fuseflow.gpu.planning.search_space import Candidates
    >>> ch = Chain("t", "ffn", 64, 128, 128, 128)   # cluster tiles 32 x 64 x 64 x 64: 2 trips each
    >>> a = analyze(ch, Device(), parse_schedule("[M] N,L,K"), "standard",
    ...             Candidates.single((1, 2, 2, 2), (32, 32, 32, 32)))
    >>> int(a.parts["l2_A"][0]) == 2 * 64*128*2   # A (64x128 fp16) re-read once per N tile
    True
    >>> TIERS[a.e_tier[0]], int(a.parts["dsm_exchange"][0]) == 64*128*(2 - 1)*(4 + 2)
    ('reg', True)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..problem.chains import Chain
from ..problem.device import LEVELS, Device
from .loop_schedules import Schedule
from .search_space import Candidates

TIERS = ("-", "reg", "smem", "dsm", "global")  # "-": the tensor is not held across a loop


@dataclass
class Analysis:
    """Per-candidate arrays: volumes per level, their breakdown, placements and capacities."""

    vol: dict          # level -> int64 bytes, levels as in device.LEVELS
    parts: dict        # breakdown name -> int64 bytes
    c_tier: np.ndarray  # TIERS index of the cached intermediate C
    e_tier: np.ndarray  # TIERS index of the E accumulator held across the N loop
    smem_used: np.ndarray
    reg_used: np.ndarray
    working_ok: np.ndarray
    blocks: np.ndarray
    clusters: np.ndarray
    trips: dict        # dim -> trip count over cluster tiles

    @property
    def rule5_ok(self) -> np.ndarray:
        """Rule 5 (capacity): working set fits one block and C stays on chip."""
        return self.working_ok & (self.c_tier != TIERS.index("global"))


def keep_reuse(dims: str, spatial: list, order: list, t: dict) -> np.ndarray:
    """Re-read factor of a tensor indexed by ``dims`` (Chimera's keep_reuse over cluster tiles).

    Spatial loops that do not index the tensor multiply (each cluster loads it); walking the
    temporal loops inner -> outer, loops are free until the first one that indexes the tensor
    with more than one trip, and every non-indexing loop outside that multiplies. Equivalently:
    a cluster reloads its tile exactly when the tile changes.

    >>> t = {"M": np.array([2]), "N": np.array([4]), "K": np.array([8])}
    >>> int(keep_reuse("MK", ["M"], ["N", "K"], t)[0]), int(keep_reuse("KN", ["M"], ["N", "K"], t)[0])
    (4, 2)
    >>> int(keep_reuse("MK", ["M"], ["N", "K"], {**t, "K": np.array([1])})[0])  # A tile stays resident
    1
    """
    mult = np.ones_like(next(iter(t.values())))
    for d in spatial:
        if d not in dims:
            mult = mult * t[d]
    found = np.zeros(mult.shape, dtype=bool)
    for d in reversed(order):
        if d in dims:
            found |= t[d] > 1
        else:
            mult = mult * np.where(found, t[d], 1)
    return mult


def inner_product(order: list, outer: str, dims: str, t: dict) -> np.ndarray:
    """Product of the trips of temporal loops over ``dims`` nested inside loop ``outer``."""
    out = np.ones_like(t["M"])
    if outer not in order:
        return out
    for d in order[order.index(outer) + 1:]:
        if d in dims:
            out = out * t[d]
    return out


def footprints(chain: Chain, schedule: Schedule, strategy: str, cls: tuple, blk: tuple) -> dict:
    """Elements of C and of the E accumulator one cluster must hold (one copy of each).

    A dim contributes its whole extent when it is a temporal loop nested inside a loop that does
    not index the tensor (L for C, N for E) -- the tensor must survive that outer loop -- and
    its cluster tile otherwise. Loops of one trip are no loops.

    >>> from fuseflow.gpu.planning.loop_schedules import parse_schedule
    >>> ch = Chain("g", "ffn", 128, 16384, 4096, 4096)
    >>> footprints(ch, parse_schedule("[M] L,N,K"), "standard", (1, 1, 1, 1), (64, 128, 64, 128))
    {'C': 1048576, 'E_acc': 8192}
    >>> footprints(ch, parse_schedule("[M] N,L,K"), "standard", (1, 1, 1, 1), (64, 128, 64, 128))
    {'C': 8192, 'E_acc': 262144}
    """
    c = Candidates.single(cls, blk)
    kk = 1 if strategy == "spatial" else c.ck
    T = {"M": c.cm * c.bm, "N": c.cn * c.bn, "K": kk * c.bk, "L": c.cl * c.bl}
    t = {d: p // T[d] for d, p in zip("MNKL", chain.padded)}
    order = list(schedule.temporal)
    out = {}
    for name, tensor, outer in (("C", "MN", "L"), ("E_acc", "ML", "N")):
        inside = order[order.index(outer) + 1:] if outer in order else []
        held = (t[outer] > 1) if outer in order else np.array([False])
        size = 1
        for d in tensor:
            size = size * np.where(held & (d in inside), T[d] * t[d], T[d])
        out[name] = int(size[0])
    return out


def analyze(chain: Chain, device: Device, schedule: Schedule, strategy: str, c: Candidates) -> Analysis:
    """Volumes of every candidate row of ``c`` under one schedule and strategy (Rules 1-4 hold)."""
    if "K" in schedule.spatial or "L" in schedule.spatial or schedule.temporal[-1] != "K":
        raise ValueError(f"schedule {schedule.name} breaks Rule 3 or 4; the execution model needs them")
    X = dict(zip("MNKL", chain.dims))
    P = dict(zip("MNKL", chain.padded))
    e, ea = device.in_bytes, device.acc_bytes
    gated, spat, seq = chain.gated, strategy == "spatial", strategy == "sequential"
    nbr = 2 if gated else 1
    nbk = 2 if seq else 1
    cm, cn, ck, cl, bm, bn, bk, bl = c.cm, c.cn, c.ck, c.cl, c.bm, c.bn, c.bk, c.bl
    kk = np.ones_like(ck) if spat else ck
    T = {"M": cm * bm, "N": cn * bn, "K": kk * bk, "L": cl * bl}
    t = {d: P[d] // T[d] for d in "MNKL"}
    sh = cl // ck
    cr = cn // sh
    blocks = cm * cn * ck
    S = [d for d in "MN" if d in schedule.spatial]
    order = list(schedule.temporal)
    clusters = np.ones_like(cm)
    for d in S:
        clusters = clusters * t[d]
    XA, XB, XD, XE, XC = X["M"] * X["K"], X["K"] * X["N"], X["N"] * X["L"], X["M"] * X["L"], X["M"] * X["N"]

    order0 = [d for d in order if d in "MN"] + ["K"]
    order1 = [d for d in order if d in "MNL"]
    parts = {}
    parts["l2_A"] = XA * e * keep_reuse("MK", S, order0, t)
    parts["l2_B"] = nbr * XB * e * keep_reuse("KN", S, order0, t)
    parts["l2_D"] = XD * e * keep_reuse("NL", S, order1, t)

    # TMA multicast writes every loaded sub-tile into each block that needs it, then MMAs read operands
    smem = parts["l2_A"] * cn * (2 if spat else 1) + parts["l2_B"] * cm + parts["l2_D"] * cm
    smem = smem + XA * e * cn * t["N"] * (2 if gated else 1) + nbr * XB * e * cm * t["M"]
    smem = smem + XC * e * cl * t["L"] + XD * e * cm * t["M"]

    # intermediate C held across the L loop, E accumulator held across the N loop
    n_c = inner_product(order, "L", "MN", t)
    c_re = (t["L"] > 1) & (n_c > 1)
    n_ml = inner_product(order, "N", "ML", t)
    e_re = (t["N"] > 1) & (n_ml > 1) & ("N" in order)

    smem_used = (device.stages * (bm * bk + nbk * bk * bn) * e + sh * bn * bl * e + bm * bn * e
                 + np.where(sh > 1, bm * bn * e, 0) + (cr - 1) * bm * (bl // cr) * ea
                 + (bm * bn * ea if spat else (ck - 1) * bm * (bn // ck) * ea * nbk))
    reg_used = bm * bn * ea * nbk + bm * bl * ea
    working_ok = (smem_used <= device.smem_per_block) & (reg_used <= device.reg_per_block)
    reg_free = device.reg_per_block - reg_used
    smem_free = device.smem_per_block - smem_used

    def place(reused, share, dup):
        tier = np.where(share <= reg_free, 1, np.where(share <= smem_free, 2,
                        np.where((dup > 1) & (share // dup <= smem_free), 3, 4)))
        tier = np.where(reused, tier, 0)
        return tier, reg_free - np.where(tier == 1, share, 0), smem_free - np.where(
            tier == 2, share, np.where(tier == 3, share // dup, 0))

    c_tier, reg_free, smem_free = place(c_re, n_c * bm * bn * e, ck)
    e_tier, reg_free, smem_free = place(e_re, n_ml * bm * bl * ea, cr)

    reg = np.where(c_tier == 1, ck * XC * e * t["L"], 0) + np.where(e_tier == 1, XE * ea * cr * 2 * (t["N"] - 1), 0)
    smem = smem + np.where(c_tier == 2, ck * XC * e * t["L"], 0) + np.where(c_tier == 3, XC * e * t["L"], 0)
    smem = smem + np.where(c_tier == 4, XC * e * ck * (t["L"] - 1), 0)
    smem = smem + np.where(e_tier == 2, XE * ea * cr * 2 * (t["N"] - 1), 0)
    smem = smem + np.where(e_tier == 3, XE * ea * 2 * (t["N"] - 1), 0)
    parts["l2_C"] = np.where(c_tier == 4, XC * e * t["L"], 0)

    n_spatial = "N" in schedule.spatial
    reduced = ((t["N"] > 1) & n_spatial) | (e_tier == 4)
    parts["l2_E"] = np.where(reduced, XE * e * (1 + t["N"]), XE * e)
    rs_events = np.where(n_spatial | (e_tier >= 3), t["N"], 1)

    if spat:
        parts["dsm_exchange"] = XC * 2 * ea * np.ones_like(ck)
    else:
        parts["dsm_exchange"] = XC * (ck - 1) * (nbk * ea + e)
    parts["dsm_shuffle"] = XC * e * ck * (sh - 1) * t["L"]
    parts["dsm_reduce_scatter"] = XE * ea * (cr - 1) * rs_events
    parts["dsm_c_cache"] = np.where(c_tier == 3, XC * e * (ck - 1) * (t["L"] - 1), 0)

    # DRAM: a tensor that fits in the L2 share is fetched once; a larger one is fetched again on every
    # temporal re-read of one cluster (clusters sharing a tile run together and hit in L2)
    fit = device.l2_bytes * device.l2_reuse_fraction

    def dram(size, misses):
        return np.where(size <= fit, size, misses)

    e_passes = np.where(e_tier == 4, t["N"], 1)
    glob = (dram(XA * e, XA * e * keep_reuse("MK", [], order0, t))
            + nbr * dram(XB * e, XB * e * keep_reuse("KN", [], order0, t))
            + dram(XD * e, XD * e * keep_reuse("NL", [], order1, t))
            + dram(XE * e, XE * e * (e_passes + reduced))
            + np.where(c_tier == 4, dram(XC * e, parts["l2_C"]), 0))
    vol = {
        "global": glob,
        "l2": parts["l2_A"] + parts["l2_B"] + parts["l2_D"] + parts["l2_E"] + parts["l2_C"],
        "dsm": parts["dsm_exchange"] + parts["dsm_shuffle"] + parts["dsm_reduce_scatter"] + parts["dsm_c_cache"],
        "smem": smem,
        "reg": reg,
    }
    assert set(vol) == set(LEVELS)
    return Analysis(vol={k: np.asarray(v, dtype=np.int64) for k, v in vol.items()},
                    parts={k: np.asarray(v, dtype=np.int64) for k, v in parts.items()},
                    c_tier=np.asarray(c_tier, dtype=np.int8), e_tier=np.asarray(e_tier, dtype=np.int8),
                    smem_used=smem_used, reg_used=reg_used, working_ok=working_ok, blocks=blocks,
                    clusters=clusters, trips=t)
