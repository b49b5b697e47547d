"""Baselines in the same traffic and cost model.

* unfused: one GEMM kernel per GEMM (activation in the epilogue), the intermediate C written to and
  read back from global memory; a gated chain runs one GEMM against [B0 | B1], an elementwise
  silu-multiply kernel, then the second GEMM.
* SMEM-only fusion (Chimera-like): the fused search restricted to clusters of one block, with every
  intermediate and partial sum in that block's registers or SMEM (no DSM, no global atomics).
  When no such plan fits, fusion fails and the chain runs unfused.

    >>> from fuseflow.gpu.problem.benchmarks import BENCHMARKS
    >>> u = unfused(BENCHMARKS["G1"])
    >>> [k.name for k in u.kernels]
    ['gemm0', 'gemm1']
    >>> smem_only(BENCHMARKS["G5"]).fused, smem_only(BENCHMARKS["G1"]).fused
    (False, True)
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..problem.chains import Chain
from ..problem.device import LEVELS, Device
from .planner import Plan, plan_chain
from .roofline import level_times
from .search_space import tile_choices
from .traffic import TIERS


@dataclass
class Kernel:
    name: str
    volumes: dict
    cost: float
    tiles: tuple = ()


@dataclass
class Baseline:
    """Total traffic per level and time of a baseline (a sum over its kernels)."""

    name: str
    volumes: dict
    cost: float
    kernels: list
    fused: bool = False
    plan: Plan | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "fused": self.fused, "volumes": self.volumes, "time_s": self.cost,
                "kernels": [{"name": k.name, "tiles": list(k.tiles), "volumes": k.volumes, "time_s": k.cost}
                            for k in self.kernels]}


def gemm_kernel(name: str, M: int, N: int, K: int, device: Device, compute: bool = True) -> Kernel:
    """Best single-block-tiled GEMM out[M,N] = X[M,K] @ W[K,N]: every block loads its own tiles.

    >>> k = gemm_kernel("g", 128, 256, 64, Device())
    >>> k.volumes["global"] == (128*64 + 64*256 + 128*256) * 2   # everything fits in L2: compulsory only
    True
    """
    e, ea = device.in_bytes, device.acc_bytes
    P = [-(-v // 16) * 16 for v in (M, N, K)]
    grids = np.meshgrid(*[np.array(tile_choices(p), dtype=np.int64) for p in P], indexing="ij")
    tm, tn, tk = (g.ravel() for g in grids)
    tM, tN = P[0] // tm, P[1] // tn
    ok = (device.stages * (tm * tk + tk * tn) * e <= device.smem_per_block) & (tm * tn * ea <= device.reg_per_block)
    tm, tn, tk, tM, tN = tm[ok], tn[ok], tk[ok], tM[ok], tN[ok]
    loads = M * K * e * tN + K * N * e * tM
    l2 = loads + M * N * e

    # each block reads its strips once (K is the only temporal loop); blocks sharing a strip run
    # together and hit in L2, so DRAM sees every tensor once (see analyzer for the rule)
    vol = {"global": np.full_like(tm, (M * K + K * N + M * N) * e),
           "l2": l2, "dsm": np.zeros_like(l2), "smem": 2 * loads, "reg": np.zeros_like(l2)}
    t = level_times(vol, np.ones_like(tm), tM * tN, device, 2 * M * N * K, compute)
    best = int(np.lexsort((l2, t["cost"]))[0])
    return Kernel(name, {k: int(v[best]) for k, v in vol.items()}, float(t["cost"][best]),
                  (int(tm[best]), int(tn[best]), int(tk[best])))


def elementwise_kernel(name: str, read_bytes: int, write_bytes: int, device: Device) -> Kernel:
    """A streaming kernel on the whole GPU (silu(C0) * C1)."""
    vol = {lv: 0 for lv in LEVELS}
    vol["global"] = vol["l2"] = read_bytes + write_bytes
    t = level_times({k: np.array([v]) for k, v in vol.items()}, np.array([1]), np.array([device.sms]), device, 0)
    return Kernel(name, vol, float(t["cost"][0]))


def _total(name, kernels, **kw) -> Baseline:
    vol = {lv: sum(k.volumes[lv] for k in kernels) for lv in LEVELS}
    return Baseline(name, vol, sum(k.cost for k in kernels), kernels, **kw)


def unfused(chain: Chain, device: Device | None = None, compute: bool = True) -> Baseline:
    """Two GEMM kernels through global memory (three kernels for a gated chain)."""
    device = device or Device()
    M, N, K, L = chain.dims
    if chain.gated:
        e = device.in_bytes
        kernels = [gemm_kernel("gemm0", M, 2 * N, K, device, compute),
                   elementwise_kernel("silu_mul", 2 * M * N * e, M * N * e, device)]
    else:
        kernels = [gemm_kernel("gemm0", M, N, K, device, compute)]
    kernels.append(gemm_kernel("gemm1", M, L, N, device, compute))
    return _total("unfused", kernels)


def _smem_only_mask(schedule, a):
    n_split = ("N" in schedule.spatial) & (a.trips["N"] > 1)
    return ~n_split & (a.e_tier != TIERS.index("global")) & (a.c_tier <= TIERS.index("smem")) & \
        (a.e_tier <= TIERS.index("smem"))


def smem_only(chain: Chain, device: Device | None = None, compute: bool = True) -> Baseline:
    """Single-block fusion with everything in registers/SMEM; unfused when no such plan fits."""
    device = device or Device()
    one = dataclasses.replace(device, max_cluster=1)
    strategies = ("sequential",) if chain.gated else None
    result = plan_chain(chain, one, topk=1, compute=compute, strategies=strategies, restrict=_smem_only_mask)
    if not result.plans:
        fallback = unfused(chain, device, compute)
        return Baseline("smem-only", fallback.volumes, fallback.cost, fallback.kernels, fused=False)
    best = result.plans[0]
    kernel = Kernel("fused", best.volumes, best.cost, best.blk)
    return Baseline("smem-only", dict(best.volumes), best.cost, [kernel], fused=True, plan=best)
