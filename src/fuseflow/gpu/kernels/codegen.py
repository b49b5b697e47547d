"""CUDA source of the fused GEMM -> activation -> GEMM kernel for a plan (sm_90a, thread-block clusters).

Everything the kernel fixes at compile time comes from :func:`fuseflow.gpu.kernels.kernel_layout.kernel_layout`
(the same description :mod:`fuseflow.gpu.emulation.kernel_emulator` runs in numpy). The kernel uses:

* thread-block clusters launched with ``cudaLaunchAttributeClusterDimension``;
* bulk copies by the copy engine (TMA, ``cuda::ptx::cp_async_bulk``) completing on mbarriers, two
  stages deep, multicast to every block of the cluster that reads the same tile;
* tensor-core MMAs through ``nvcuda::wmma`` (16x16x16, FP16 or BF16 in, FP32 accumulators);
* the all-exchange, shuffle ring and reduce-scatter as reads of peer shared memory through
  ``cooperative_groups::cluster_group::map_shared_rank`` between ``cluster.sync()`` barriers;
* the inter-cluster reduction as bulk FP16/BF16 add-reductions into E in L2
  (``cp.reduce.async.bulk``; element atomics where a slice row is not 16-byte sized), after a memset.

    >>> from fuseflow.gpu.problem.benchmarks import BENCHMARKS
    >>> from fuseflow.gpu.planning.planner import plan_chain
    >>> src = emit_cuda(BENCHMARKS["G1"], plan_chain(BENCHMARKS["G1"], topk=1).plans[0])
    >>> all(s in src for s in ("map_shared_rank", "wmma::mma_sync", "cp_async_bulk", "ClusterDimension"))
    True
"""
from __future__ import annotations

from fuseflow.errors import NotSupported

from ..problem.chains import Chain
from ..problem.device import Device
from .kernel_layout import MMA, PAD, THREADS, WARPS, KernelLayout, kernel_layout, unsupported_reason
from .kernel_template import TEMPLATE

_ACT = {
    "relu": "fmaxf(x, 0.0f)",
    "silu": "x / (1.0f + __expf(-x))",
    "gelu": "0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)))",
}
_TYPES = {"fp16": ("half", "__half2float", "__float2half"),
          "bf16": ("__nv_bfloat16", "__bfloat162float", "__float2bfloat16")}

HEADER = ("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#include <cuda_runtime.h>\n"
          "#include <cooperative_groups.h>\n#include <mma.h>\n#include <cuda/ptx>\n#include <cstdint>\n")


def supported(chain: Chain, plan, device: Device | None = None) -> str | None:
    """None if emit_cuda handles the plan, else the reason it does not."""
    reason = unsupported_reason(chain, plan)
    if reason:
        return reason
    try:
        kernel_layout(chain, plan, device)
    except NotSupported as err:
        return err.what
    return None


def launcher_name(name: str) -> str:
    """The extern "C" entry point of the kernel built under namespace ``name``."""
    return f"fuseflow_{name}_launch"


def _constants(lay: KernelLayout, name: str) -> dict:
    cm, cn, ck, cl = lay.cls
    bm, bn, bk, bl = lay.blk
    tm, tn, tk, tl = lay.tiles
    chain = lay.chain
    elem, to_f, to_t = _TYPES[lay.dtype]
    values = {
        "NAME": name, "LAUNCH": launcher_name(name), "CHAIN": chain.describe(),
        "M_": chain.M, "N_": chain.N, "K_": chain.K, "L_": chain.L,
        "CMv": cm, "CNv": cn, "CKv": ck, "CLv": cl, "BMv": bm, "BNv": bn, "BKv": bk, "BLv": bl, "BK1v": lay.bk1,
        "TMv": tm, "TNv": tn, "TKv": tk, "TLv": tl, **{f"t{d}v": v for d, v in lay.trips.items()},
        "SHv": lay.sh, "CRv": lay.cr, "PAD": PAD, "NT": THREADS, "WARPS": WARPS, "MMA": MMA,
        "GATED": str(chain.gated).lower(), "SPATIAL": str(lay.strategy == "spatial").lower(),
        "SEQ": str(lay.strategy == "sequential").lower(), "REDUCE_E": str(lay.reduce_e).lower(),
        "ACT": _ACT["silu" if chain.gated else chain.act], "CLUSTERS": lay.clusters,
        "ELEM": elem, "TO_F": to_f, "TO_T": to_t, "SMEM": lay.smem_bytes,
    }
    for region, offset, _ in lay.smem:
        values[f"OFF_{region.upper()}"] = offset
    return values


def _loops(lay: KernelLayout) -> tuple[str, str, str]:
    """Grid decode of the cluster id, the declarations of dims with one trip, and the temporal loops."""
    var = {"M": "m", "N": "n", "L": "lt"}
    decode, div = [], "cid"
    for d in lay.spatial:
        decode.append(f"  const int {var[d]} = {div} % t{d};")
        div = f"({div} / t{d})"
    decl = "".join(f"  const int {var[d]} = 0;\n" for d in "MNL" if d not in lay.spatial and d not in lay.temporal)
    loops = "".join(f"{'  ' * (i + 1)}for (int {var[d]} = 0; {var[d]} < t{d}; ++{var[d]})\n"
                    for i, d in enumerate(lay.temporal))
    return "\n".join(decode) or "  (void)cid;", decl, loops


def emit_cuda(chain: Chain, plan, name: str = "fused", device: Device | None = None, header: bool = True,
              dtype: str = "fp16") -> str:
    """CUDA C++ for ``plan`` inside ``namespace name`` with an ``extern "C"`` launcher
    (:func:`launcher_name`); ``header=False`` leaves out the #includes, to put several plans in one file."""
    lay = kernel_layout(chain, plan, device, dtype)
    values = _constants(lay, name)
    values["DECODE"], values["DECL"], values["LOOPS"] = _loops(lay)
    values["NFIRST"] = "true" if "N" in lay.spatial else "(n == 0)"
    values["NLAST"] = "true" if "N" in lay.spatial else "(n == tN - 1)"
    values["PLAN"] = plan.summary().strip()
    body = TEMPLATE
    for key, value in values.items():
        body = body.replace(f"@{key}@", str(value))
    if "@" in body:
        raise AssertionError("unfilled template field in the CUDA source")
    return HEADER + body if header else body


def emit_library(chain: Chain, ranked_plans, device: Device | None = None, dtype: str = "fp16") -> tuple[str, dict]:
    """One translation unit with a kernel per (rank, plan) that the generator supports; returns the
    source and {rank: launcher name} (plans it cannot build are left out: see :func:`supported`).

    >>> from fuseflow.gpu.problem.benchmarks import BENCHMARKS
    >>> from fuseflow.gpu.planning.planner import plan_chain
    >>> src, names = emit_library(BENCHMARKS["G2"], enumerate(plan_chain(BENCHMARKS["G2"], topk=2).plans, 1))
    >>> names
    {1: 'fuseflow_r1_launch', 2: 'fuseflow_r2_launch'}
    """
    parts, names = [HEADER], {}
    for rank, plan in ranked_plans:
        if supported(chain, plan, device) is None:
            parts.append(emit_cuda(chain, plan, name=f"r{rank}", device=device, header=False, dtype=dtype))
            names[rank] = launcher_name(f"r{rank}")
    return "\n".join(parts), names
