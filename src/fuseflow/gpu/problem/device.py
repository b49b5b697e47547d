"""Device model: every bandwidth and capacity the planner uses, in one dataclass.

Defaults describe an H100 SXM (see docs/gpu.md for sources); any field can be
overridden from a JSON or TOML file with :func:`load_device`.

    >>> d = Device()
    >>> d.sms, d.max_cluster, d.smem_per_block
    (132, 16, 232448)
    >>> d.dsm_bandwidth(2) > d.dsm_bandwidth(16)
    True
    >>> d.resident_blocks(16)
    128
"""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import tomllib
from dataclasses import dataclass, field

from fuseflow.errors import UserError
from fuseflow.files import read_file

KB = 1024
LEVELS = ("global", "l2", "dsm", "smem", "reg")


def _default_dsm() -> dict[int, float]:
    # Ring-copy bandwidth measured on H800 for clusters of 2 and 4 (Luo et al.);
    # 8 and 16 extrapolated. Aggregate over the whole GPU, bytes/s.
    return {2: 3.27e12, 4: 2.65e12, 8: 2.3e12, 16: 1.8e12}


@dataclass(frozen=True)
class Device:
    """Capacities (bytes) and bandwidths (bytes/s, whole GPU) of one GPU."""

    name: str = "H100-SXM"
    sms: int = 132
    gpc_sms: tuple[int, ...] = (18, 18, 16, 16, 16, 16, 16, 16)  # SMs per GPC (sum = sms)
    max_cluster: int = 16
    smem_per_block: int = 227 * KB
    reg_per_block: int = 128 * KB        # register bytes a block may use for tiles
    l2_bytes: int = 50 * 1000 * 1000
    l2_reuse_fraction: float = 0.5       # a tensor re-read hits in L2 if size <= this * l2_bytes
    bw_global: float = 3.35e12           # HBM3 peak
    bw_l2: float = 6.0e12                # not published; uncertain
    bw_dsm: dict[int, float] = field(default_factory=_default_dsm)
    bw_smem: float = 29.6e12             # 132 SMs x 128 B/clk x 1.755 GHz
    bw_reg: float = 118.0e12             # 4x SMEM: never the bottleneck in practice
    peak_flops: float = 989.4e12         # FP16 dense tensor-core peak
    mem_saturation: float = 0.5          # fraction of busy SMs that saturates L2 and HBM bandwidth
    stages: int = 2                      # pipeline stages of the A/B staging buffers
    in_bytes: int = 2                    # FP16 inputs, intermediate and output
    acc_bytes: int = 4                   # FP32 accumulators and exchanged partial sums

    def __post_init__(self):
        for name in ("sms", "max_cluster", "smem_per_block", "reg_per_block", "l2_bytes", "stages",
                     "in_bytes", "acc_bytes", "bw_global", "bw_l2", "bw_smem", "bw_reg", "peak_flops"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise UserError(f"device field {name} must be a finite positive number, got {value}", "device")
        if not self.gpc_sms or min(self.gpc_sms) <= 0:
            raise UserError(f"gpc_sms must list positive SM counts, got {list(self.gpc_sms)}", "device")
        if sum(self.gpc_sms) != self.sms:
            raise UserError(f"gpc_sms sums to {sum(self.gpc_sms)} but sms is {self.sms}", "device",
                            "make the per-GPC SM counts add up to sms")
        if self.max_cluster > max(self.gpc_sms):
            raise UserError(f"max_cluster {self.max_cluster} exceeds the largest GPC ({max(self.gpc_sms)} SMs)",
                            "device", "a cluster runs inside one GPC: lower max_cluster")
        if not 0 < self.mem_saturation <= 1 or not 0 < self.l2_reuse_fraction <= 1:
            raise UserError("mem_saturation and l2_reuse_fraction must lie in (0, 1]", "device")
        for size in (2, 4, 8, 16):
            if size <= self.max_cluster and size not in self.bw_dsm:
                raise UserError(f"bw_dsm has no entry for cluster size {size}", "device")
        for size, bandwidth in self.bw_dsm.items():
            if size < 1 or not math.isfinite(bandwidth) or bandwidth <= 0:
                raise UserError(f"bw_dsm[{size}] = {bandwidth} must be a finite positive bandwidth", "device")

    def dsm_bandwidth(self, cluster_size: int) -> float:
        """Aggregate DSM bandwidth for clusters of this size (bytes/s); inf for 1 (no DSM)."""
        return float("inf") if cluster_size <= 1 else self.bw_dsm[cluster_size]

    def resident_blocks(self, cluster_size: int) -> int:
        """Blocks that run at once (one block per SM; a cluster must fit inside one GPC)."""
        return sum((g // cluster_size) * cluster_size for g in self.gpc_sms)

    def bandwidth(self, level: str, cluster_size: int = 1) -> float:
        """Bandwidth of a level name in LEVELS."""
        if level == "dsm":
            return self.dsm_bandwidth(cluster_size)
        return {"global": self.bw_global, "l2": self.bw_l2, "smem": self.bw_smem, "reg": self.bw_reg}[level]

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["bw_dsm"] = {str(k): v for k, v in self.bw_dsm.items()}
        data["gpc_sms"] = list(self.gpc_sms)
        return data


def device_from_dict(data: dict, where: str = "device") -> Device:
    """Build a Device from H100 defaults overridden by ``data``.

    >>> device_from_dict({"bw_global": 3.0e12, "bw_dsm": {"2": 3e12, "4": 2e12, "8": 1e12, "16": 5e11}}).bw_dsm[16]
    500000000000.0
    >>> device_from_dict({"sm": 3})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    fuseflow.errors.UserError: device: unknown device field 'sm' (fix: known fields: name, sms, ...)
    """
    known = {f.name: f for f in dataclasses.fields(Device)}
    values = {}
    for key, value in data.items():
        if key not in known:
            raise UserError(f"unknown device field {key!r}", where, f"known fields: {', '.join(known)}")
        default = getattr(Device(), key)
        try:
            if key == "bw_dsm":
                if not isinstance(value, dict):
                    raise TypeError("a table of cluster size -> bytes/s")
                value = {int(k): float(v) for k, v in value.items()}
            elif key == "gpc_sms":
                if not isinstance(value, (list, tuple)) or any(isinstance(v, bool) or v != int(v) for v in value):
                    raise TypeError("a list of whole numbers")
                value = tuple(int(v) for v in value)
            elif isinstance(default, bool) or isinstance(value, bool):
                raise TypeError("not a boolean field")
            elif isinstance(default, int):
                if float(value) != int(value):
                    raise TypeError("an integer")
                value = int(value)
            elif isinstance(default, float):
                value = float(value)
            elif isinstance(default, str):
                value = str(value)
        except (TypeError, ValueError, OverflowError) as err:
            raise UserError(f"device field {key!r} has a bad value {value!r} ({err})", where) from None
        values[key] = value
    return dataclasses.replace(Device(), **values)


def load_device(path: str | None) -> Device:
    """Device from a .json or .toml file (missing fields keep H100 defaults); None -> defaults."""
    if path is None:
        return Device()
    file = pathlib.Path(path)
    raw = read_file(file, "--device")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"device file is not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start})",
                        str(path)) from None
    kind = "TOML" if file.suffix == ".toml" else "JSON"
    try:
        data = tomllib.loads(text) if kind == "TOML" else json.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
        raise UserError(f"device file is not valid {kind}: {err}", str(path)) from None
    except RecursionError:
        raise UserError(f"device file nests its {kind} too deeply", str(path),
                        "a device file is one table of fields") from None
    if not isinstance(data, dict):
        raise UserError("device file must hold a table of fields", str(path))
    return device_from_dict(data, where=str(path))
