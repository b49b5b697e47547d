"""Compiling generated CUDA with nvcc for sm_90a, cached by the hash of the source and flags.

``compile_cuda`` returns what ptxas reports per kernel (registers, spills, static shared memory),
so tests can hold the compiled kernel to the plan's resource budget.

    >>> parse_ptxas('''ptxas info    : Compiling entry function '_ZN2g16kernelEv' for 'sm_90a'
    ... ptxas info    : Function properties for _ZN2g16kernelEv
    ...     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ... ptxas info    : Used 49 registers, used 1 barriers, 16 bytes smem''')["_ZN2g16kernelEv"]
    KernelResources(registers=49, spill_stores=0, spill_loads=0, static_smem=16, stack=0)
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import re
import shutil
import subprocess
from dataclasses import dataclass

NVCC_CANDIDATES = ("/usr/local/cuda/bin/nvcc",)
ARCH_FLAGS = ("-gencode=arch=compute_90a,code=sm_90a",)   # wgmma/multicast need the 'a' target
BASE_FLAGS = ("-std=c++17", "-O3", "-Xptxas", "-v")


@dataclass(frozen=True)
class KernelResources:
    registers: int
    spill_stores: int
    spill_loads: int
    static_smem: int
    stack: int


@dataclass(frozen=True)
class CompileResult:
    ok: bool
    output: str                  # path of the object or library ('' when the compile failed)
    log: str
    kernels: dict                # mangled name -> KernelResources
    cached: bool


def find_nvcc() -> str | None:
    """Path of nvcc, or None."""
    found = shutil.which("nvcc")
    if found:
        return found
    return next((p for p in NVCC_CANDIDATES if os.path.exists(p)), None)


def cache_dir() -> pathlib.Path:
    """Where compiled kernels are kept ($FUSEFLOW_CUDA_CACHE, else ~/.cache/fuseflow/cuda)."""
    root = os.environ.get("FUSEFLOW_CUDA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "fuseflow", "cuda")
    path = pathlib.Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def parse_ptxas(log: str) -> dict:
    """Per-kernel resources from ``-Xptxas -v`` output."""
    out, name, props = {}, None, {}
    for line in log.splitlines():
        entry = re.search(r"Compiling entry function '([^']+)'", line)
        if entry:
            name, props = entry.group(1), {}
            continue
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if frame and name:
            props.update(stack=int(frame[1]), spill_stores=int(frame[2]), spill_loads=int(frame[3]))
        used = re.search(r"Used (\d+) registers", line)
        if used and name:
            smem = re.search(r"(\d+) bytes smem", line)
            out[name] = KernelResources(registers=int(used[1]), spill_stores=props.get("spill_stores", 0),
                                        spill_loads=props.get("spill_loads", 0),
                                        static_smem=int(smem[1]) if smem else 0, stack=props.get("stack", 0))
    return out


def compile_cuda(source: str, shared: bool = False, nvcc: str | None = None, timeout: int = 600) -> CompileResult:
    """Compile ``source`` to an object (or, ``shared=True``, a loadable library), reusing an earlier
    build of the same source and flags."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        return CompileResult(False, "", "nvcc not found", {}, False)
    flags = [*ARCH_FLAGS, *BASE_FLAGS] + (["-shared", "-Xcompiler", "-fPIC"] if shared else ["-c"])
    key = hashlib.sha256((source + "\0" + " ".join(flags)).encode()).hexdigest()[:24]
    folder = cache_dir()
    out, log_path = folder / f"{key}.{'so' if shared else 'o'}", folder / f"{key}.log"
    if out.exists() and log_path.exists():
        log = log_path.read_text()
        return CompileResult(True, str(out), log, parse_ptxas(log), True)
    src = folder / f"{key}.cu"
    src.write_text(source)
    tmp = folder / f"{key}.{os.getpid()}.tmp"
    proc = subprocess.run([nvcc, *flags, str(src), "-o", str(tmp)], capture_output=True, text=True, timeout=timeout)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        return CompileResult(False, "", log, {}, False)
    log_path.write_text(log)
    os.replace(tmp, out)
    return CompileResult(True, str(out), log, parse_ptxas(log), False)


def nvcc_check(source: str, nvcc: str | None = None, timeout: int = 600) -> tuple[bool, str]:
    """Compile ``source`` to an object file (not run); (ok, compiler output)."""
    result = compile_cuda(source, nvcc=nvcc, timeout=timeout)
    return result.ok, result.log
