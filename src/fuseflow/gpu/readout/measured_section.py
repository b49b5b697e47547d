"""The measured part of docs/gpu.md: the table of all chains, the model against the measurements
(Kendall tau per chain, where the model is most wrong) and the fitted device file.

    >>> text = replace_section("# page\\n<!-- measured:begin -->\\nold\\n<!-- measured:end -->\\nrest\\n", "new")
    >>> text.splitlines()
    ['# page', '<!-- measured:begin -->', 'new', '<!-- measured:end -->', 'rest']
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from fuseflow.errors import UserError

from ..measuring.measurements import ChainMeasurement, format_measured_table, phase_lines, summary_lines
from ..problem.device import Device
from .model_check import Observation, device_toml, fit_bandwidths, most_wrong, rank_correlations

BEGIN, END = "<!-- measured:begin -->", "<!-- measured:end -->"


@dataclass(frozen=True)
class GpuInfo:
    """What was read off the GPU the measurements ran on."""

    name: str
    sms: int
    l2_bytes: int
    copy_bandwidth: float      # bytes/s of a device-to-device copy (read + write)
    torch_version: str
    nvcc_version: str


@dataclass(frozen=True)
class MeasuredReport:
    markdown: str
    device_file: str
    observations: list


def observations(rows: list[ChainMeasurement]) -> list[Observation]:
    """Every plan that ran within tolerance, as (predicted, measured) pairs with its modelled volumes."""
    return [Observation(p.chain, p.rank, p.volumes, p.cluster_size, p.occupancy, p.predicted_us * 1e-6,
                        p.timing.median_us * 1e-6) for r in rows for p in r.plans if p.ok]


def _model_section(obs, base: Device) -> list[str]:
    corr = rank_correlations(obs)
    lines = ["### Model against measurement", "",
             "| chain | plans measured | Kendall tau | p-value |", "|---|---:|---:|---:|"]
    lines += [f"| {c.chain} | {c.plans} | {c.tau:.2f} | {c.pvalue:.2g} |" for c in corr]
    taus = [c.tau for c in corr if not math.isnan(c.tau)]
    lines += ["", f"Mean Kendall tau over {len(taus)} chains: " + (f"{sum(taus) / len(taus):.2f}" if taus else "–"),
              "", "Where the model is most wrong (measured / predicted):", "",
              "| chain | rank | cluster | predicted us | measured us | ratio |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {o.chain} | {o.rank} | {o.cluster_size} | {o.predicted_s * 1e6:.1f} | {o.measured_s * 1e6:.1f} | "
              f"{o.measured_s / o.predicted_s:.2f} |" for o in most_wrong(obs)]
    return lines


def build_report(rows: list[ChainMeasurement], gpu: GpuInfo, base: Device | None = None) -> MeasuredReport:
    """Markdown for docs/gpu.md and the fitted device file, from the measured chains."""
    base = base or Device()
    obs = observations(rows)
    fitted = fit_bandwidths(obs, base.mem_saturation)
    measured = {"l2_bytes": gpu.l2_bytes, "bw_global": float(f"{gpu.copy_bandwidth:.4g}")}
    dtype = rows[0].dtype if rows else "fp16"
    lines = [f"Measured on {gpu.name} ({gpu.sms} SMs, {gpu.l2_bytes / 1e6:.0f} MB L2), PyTorch {gpu.torch_version}, "
             f"nvcc {gpu.nvcc_version}, {dtype.upper()} inputs, FP32 accumulation. Times are medians of CUDA-event "
             "timed runs after warm-up; the fused time includes the memset of E where the plan reduces over clusters. "
             "Max err = max |E - E_fp32| / max |E_fp32| against PyTorch in FP32.", "",
             format_measured_table(rows), "", *[f"* {s}" for s in summary_lines(rows)],
             f"* device-to-device copy: {gpu.copy_bandwidth / 1e12:.2f} TB/s (read + write)", "",
             "Memory-bound chains under 1.3x: share of each cluster's time per kernel phase (GEMM0 loads and "
             "MMAs, all-exchange, GEMM1 with the shuffle, reduce-scatter and store), from one timed launch:", "",
             *([f"* {line}" for line in phase_lines(rows)] or ["* none"]), "",
             *_model_section(obs, base), "",
             "Fitted device file (`fuseflow gpu plan --device`):", "", "```toml",
             device_toml(gpu.name, base, fitted, measured).rstrip(), "```"]
    return MeasuredReport("\n".join(lines), device_toml(gpu.name, base, fitted, measured), obs)


def device_slug(name: str) -> str:
    """A file name stem for a GPU's device file: its model number where the name has one.

    >>> device_slug("NVIDIA H200"), device_slug("NVIDIA GeForce RTX 4090"), device_slug("Some GPU")
    ('h200', 'rtx4090', 'somegpu')
    """
    found = re.search(r"\b([a-z]{1,3})\s?(\d{2,4})\b", name.lower())
    return found.group(1) + found.group(2) if found else re.sub(r"[^a-z0-9]", "", name.lower()) or "gpu"


def replace_section(page: str, body: str) -> str:
    """``page`` with the text between the measured-section markers replaced by ``body``."""
    if BEGIN not in page or END not in page:
        raise UserError(f"the page has no {BEGIN} ... {END} section to fill", "--docs")
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{body}\n{END}{tail}"
