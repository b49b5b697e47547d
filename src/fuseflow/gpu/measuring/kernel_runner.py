"""Running generated kernels on a CUDA GPU: compile a chain's plans (nvcc, loaded with ctypes), launch
them on PyTorch's stream, check E against PyTorch in FP32 and time them beside PyTorch unfused
(cuBLAS GEMM, activation, GEMM) and torch.compile of the same chain.

Without a CUDA device or nvcc, :func:`require_cuda` stops with one line (exit 2). The PyTorch side
of the comparison runs anywhere:

    >>> import torch
    >>> from fuseflow.gpu.problem.benchmarks import BENCHMARKS
    >>> A, B, D = torch.ones(2, 3), torch.ones(3, 4), torch.ones(4, 1)
    >>> torch_chain(BENCHMARKS["G1"], torch)(A, B, None, D).flatten().tolist()
    [12.0, 12.0]
"""
from __future__ import annotations

import ctypes
import math

from fuseflow.errors import NotSupported

from ..kernels.codegen import emit_library
from ..kernels.nvcc import compile_cuda, find_nvcc
from ..planning.baselines import unfused
from ..planning.planner import plan_chain
from ..problem.chains import Chain
from ..problem.device import Device
from .measurements import TOLERANCE, ChainMeasurement, PlanMeasurement
from .timing_stats import WARMUP, time_cuda

TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}


def require_cuda(where: str = "gpu run"):
    """torch with a CUDA device, and nvcc; else NotSupported (one line, exit 2)."""
    import torch  # noqa: PLC0415 - torch's CUDA state is read only when a GPU run is asked for
    if not torch.cuda.is_available():
        raise NotSupported("no CUDA device: PyTorch sees no GPU, so no kernel can run here", where,
                           "run on a machine with an NVIDIA Hopper GPU (sm_90a)")
    if find_nvcc() is None:
        raise NotSupported("nvcc not found: the kernels cannot be compiled", where, "install the CUDA toolkit")
    return torch


def make_inputs(chain: Chain, dtype: str, torch, seed: int = 0):
    """A, B0, B1, D on the GPU, scaled so products stay near 1 (B1 None for ungated chains)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dt = getattr(torch, TORCH_DTYPES[dtype])
    M, N, K, L = chain.dims

    def normal(rows, cols, scale):
        return (torch.randn(rows, cols, device="cuda", generator=gen) * scale).to(dt).contiguous()
    A = (torch.rand(M, K, device="cuda", generator=gen) * 2 - 1).to(dt).contiguous()
    B0 = normal(K, N, K ** -0.5)
    B1 = normal(K, N, K ** -0.5) if chain.gated else None
    return A, B0, B1, normal(N, L, N ** -0.5)


def torch_chain(chain: Chain, torch):
    """The chain as PyTorch eager ops: GEMM (cuBLAS), activation, GEMM (gated: two GEMMs, silu, mul)."""
    F = torch.nn.functional
    act = {"relu": F.relu, "silu": F.silu, "gelu": lambda x: F.gelu(x, approximate="tanh")}[chain.act]
    if chain.gated:
        return lambda A, B0, B1, D: (F.silu(A @ B0) * (A @ B1)) @ D
    return lambda A, B0, B1, D: act(A @ B0) @ D


def relative_error(E, ref) -> float:
    """max |E - ref| / max |ref| (E in its element type, ref in FP32)."""
    scale = float(ref.abs().max())
    return float((E.float() - ref).abs().max()) / (scale or 1.0)


PHASES = ("gemm0", "exchange", "gemm1", "store")   # the kernel's phase_ns slots


def kernel_launcher(lib, name: str, args, stream: int, phase_ns=None):
    """A callable that launches kernel ``name`` with tensors ``args`` (A, B0, B1, D, E) on ``stream``."""
    fn = getattr(lib, name)
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] * 7
    ptrs = [ctypes.c_void_p(t.data_ptr() if t is not None else 0) for t in (*args, phase_ns)]
    ptrs.append(ctypes.c_void_p(stream))

    def run():
        err = fn(*ptrs)
        if err:
            raise RuntimeError(f"launch of {name} failed with CUDA error {err}")
    return run


def measure_plan(torch, lib, name, chain, rank, plan, inputs, ref, dtype, reps) -> PlanMeasurement:
    E = torch.empty(chain.M, chain.L, device="cuda", dtype=inputs[0].dtype)
    base = dict(chain=chain.name, rank=rank, plan=plan.summary().strip(), predicted_us=plan.cost * 1e6,
                volumes=dict(plan.volumes), cluster_size=plan.blocks, occupancy=plan.occupancy)
    try:
        run = kernel_launcher(lib, name, (*inputs, E), torch.cuda.current_stream().cuda_stream)
        run()
        torch.cuda.synchronize()
        err = relative_error(E, ref)
        ok = math.isfinite(err) and err <= TOLERANCE[dtype]
        timing = time_cuda(run, torch, reps=reps, warmup=WARMUP)
        phases = _phase_shares(torch, lib, name, (*inputs, E)) if rank == 1 else {}
    except RuntimeError as failure:      # a launch error or a fault in the kernel, reported per plan
        return PlanMeasurement(**base, timing=None, max_error=math.nan, within_tolerance=False, error=str(failure))
    return PlanMeasurement(**base, timing=timing, max_error=err, within_tolerance=ok, phase_share=phases)


def _phase_shares(torch, lib, name, args) -> dict:
    """One more launch with the phase timers on: each phase's share of the clusters' time."""
    slots = torch.zeros(len(PHASES), dtype=torch.int64, device="cuda")
    kernel_launcher(lib, name, args, torch.cuda.current_stream().cuda_stream, slots)()
    torch.cuda.synchronize()
    ns = slots.tolist()
    return {p: v / sum(ns) for p, v in zip(PHASES, ns)} if sum(ns) > 0 else {}


def measure_chain(chain: Chain, topk: int = 1, dtype: str = "fp16", reps: int = 25,
                  device: Device | None = None, only_rank: int | None = None) -> ChainMeasurement:
    """Run the chain's top-``topk`` plans (or only ``only_rank``) and PyTorch eager on this GPU."""
    torch = require_cuda()
    device = device or Device()
    plans = plan_chain(chain, device, topk=max(topk, only_rank or 1)).plans
    ranked = [(r, p) for r, p in enumerate(plans, 1) if only_rank in (None, r)]
    source, names = emit_library(chain, ranked, device, dtype)
    built = compile_cuda(source, shared=True)
    if not built.ok:
        raise RuntimeError(f"nvcc failed on {chain.name}:\n{built.log[-3000:]}")
    lib = ctypes.CDLL(built.output)
    inputs = make_inputs(chain, dtype, torch)
    fp32 = [t.float() if t is not None else None for t in inputs]
    ref = torch_chain(chain, torch)(*fp32)
    measured = [measure_plan(torch, lib, names[r], chain, r, p, inputs, ref, dtype, reps) for r, p in ranked
                if r in names]
    notes = [f"rank {r} not generated" for r, _ in ranked if r not in names]
    eager = torch_chain(chain, torch)
    base = unfused(chain, device)
    return ChainMeasurement(chain.name, chain.dims, float(chain.flops()), measured,
                            time_cuda(lambda: eager(*inputs), torch, reps=reps), None, base.cost * 1e6,
                            plans[0].bottleneck, dtype, notes)


def measure_compiled(chain: Chain, dtype: str = "fp16", reps: int = 25):
    """torch.compile of the chain (default mode), timed after its compile and warm-up."""
    torch = require_cuda()
    inputs = make_inputs(chain, dtype, torch)
    compiled = torch.compile(torch_chain(chain, torch), dynamic=False)
    return time_cuda(lambda: compiled(*inputs), torch, reps=reps)


def measure_copy_bandwidth(torch, gib: float = 1.0) -> float:
    """HBM bandwidth seen by a device-to-device copy (bytes read + written per second, median of 20)."""
    n = int(gib * 2**30) // 4
    src = torch.empty(n, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    timing = time_cuda(lambda: dst.copy_(src), torch, reps=20)
    return 2 * n * 4 / (timing.median_us * 1e-6)

