"""Cost model: the slowest memory level (volume / bandwidth), optionally against tensor-core time.

SMEM, register, DSM and tensor-core throughput belong to the SMs: a plan keeping only part of the
GPU busy gets that part of them. L2 and HBM bandwidth saturate once ``device.mem_saturation`` of
the SMs issue requests. DSM bandwidth depends on the cluster size.

    >>> import numpy as np
    >>> vol = {"global": np.array([3.35e9]), "l2": np.array([0]), "dsm": np.array([0]),
    ...        "smem": np.array([0]), "reg": np.array([0])}
    >>> c = level_times(vol, np.array([1]), np.array([132]), Device(), flops=0)
    >>> round(float(c["cost"][0]), 6), str(c["bottleneck"][0])
    (0.001, 'global')
"""
from __future__ import annotations

import numpy as np

from ..problem.device import LEVELS, Device


def active_blocks(device: Device, cluster_size: np.ndarray, total_blocks: np.ndarray) -> np.ndarray:
    """Blocks running at once: the grid, capped by how many clusters of that size fit the GPCs."""
    table = {s: device.resident_blocks(s) for s in (1, 2, 4, 8, 16) if s <= device.max_cluster}
    cap = np.zeros_like(cluster_size)
    for size, n in table.items():
        cap = np.where(cluster_size == size, n, cap)
    return np.minimum(total_blocks, cap)


def level_times(vol: dict, cluster_size, total_blocks, device: Device, flops: float, compute: bool = True) -> dict:
    """Seconds per level ('t_<level>'), 't_compute', 'occupancy', 'cost' and 'bottleneck' arrays."""
    cluster_size = np.asarray(cluster_size)
    occ = active_blocks(device, cluster_size, np.asarray(total_blocks)) / device.sms
    out = {"occupancy": occ}
    dsm_bw = np.ones(cluster_size.shape)
    for size, bw in device.bw_dsm.items():
        dsm_bw = np.where(cluster_size == size, bw, dsm_bw)
    for level in LEVELS:
        bw = dsm_bw if level == "dsm" else device.bandwidth(level)
        share = np.minimum(1.0, occ / device.mem_saturation) if level in ("global", "l2") else occ
        out[f"t_{level}"] = np.asarray(vol[level], dtype=np.float64) / (bw * share)
    out["t_compute"] = np.full(occ.shape, float(flops)) / (device.peak_flops * occ)
    names = [f"t_{lv}" for lv in LEVELS] + (["t_compute"] if compute else [])
    stack = np.stack([out[n] for n in names])
    out["cost"] = stack.max(axis=0)
    out["bottleneck"] = np.array([n[2:] for n in names])[stack.argmax(axis=0)]
    return out
