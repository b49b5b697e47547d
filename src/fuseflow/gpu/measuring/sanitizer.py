"""compute-sanitizer (memcheck, racecheck) on a plan's standalone reproducer, each run under a time limit;
where the tool is missing the stage is skipped with a line saying so.

    >>> sanitizer_command("/x/compute-sanitizer", "racecheck", "/tmp/repro")[:3]
    ['/x/compute-sanitizer', '--tool', 'racecheck']
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from ..kernels.nvcc import find_nvcc
from ..kernels.reproducer import build_command, emit_reproducer

SANITIZER_CANDIDATES = ("/usr/local/cuda/bin/compute-sanitizer",)
ERROR_EXIT = 9


def find_sanitizer() -> str | None:
    """Path of compute-sanitizer (on PATH or under /usr/local/cuda/bin), or None."""
    found = shutil.which("compute-sanitizer")
    return found or next((p for p in SANITIZER_CANDIDATES if os.path.exists(p)), None)


def sanitizer_command(tool_path: str, tool: str, exe: str) -> list[str]:
    extra = ["--racecheck-report", "hazard"] if tool == "racecheck" else []
    return [tool_path, "--tool", tool, *extra, "--error-exitcode", str(ERROR_EXIT), "--print-limit", "5", exe]


@dataclass(frozen=True)
class SanitizerRun:
    tool: str
    status: str        # ok, fault (the tool found errors, or the kernel failed), timeout, error (no build)
    reason: str


def build_reproducer(chain, plan, folder: str, stem: str, dtype: str = "fp16", timeout_s: float = 300) -> str:
    """Write ``stem.cu`` and build ``stem`` (an executable) in ``folder``; the executable's path."""
    source, exe = os.path.join(folder, f"{stem}.cu"), os.path.join(folder, stem)
    with open(source, "w", encoding="utf-8") as f:
        f.write(emit_reproducer(chain, plan, dtype=dtype))
    proc = subprocess.run(build_command(source, exe, find_nvcc() or "nvcc"), capture_output=True, text=True,
                          timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError("nvcc failed on the reproducer: " + (proc.stderr.strip().splitlines() or ["?"])[-1])
    return exe


def sanitize(tool_path: str, tool: str, exe: str, timeout_s: float) -> SanitizerRun:
    """Run ``exe`` under compute-sanitizer's ``tool``; its verdict in one line."""
    try:
        proc = subprocess.run(sanitizer_command(tool_path, tool, exe), capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return SanitizerRun(tool, "timeout", f"{tool} ran past {timeout_s:.0f} s")
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    if proc.returncode == 0:
        return SanitizerRun(tool, "ok", lines[-1][:200] if lines else "")
    summary = [ln.strip("= ") for ln in lines if "ERROR SUMMARY" in ln or "RACECHECK SUMMARY" in ln]
    first = [ln.strip("= ") for ln in lines if ln.startswith("=") and "SUMMARY" not in ln and
             any(w in ln for w in ("Invalid", "Race", "hazard", "rror", "Program hit"))]
    said = "; ".join(first[:1] + summary[:1]) or (lines[-1] if lines else f"exit {proc.returncode}")
    return SanitizerRun(tool, "fault", said[:300])
