"""CUDA source for a fused plan, using thread-block clusters and distributed shared memory.

The kernel reproduces the plan's structure -- cluster shape, block roles, loop order, the
all-exchange / shuffle ring / reduce-scatter as DSM reads through
``cooperative_groups::cluster_group::map_shared_rank`` and the inter-cluster reduction as
atomics -- with plain loads and FMA loops instead of TMA and tensor-core MMAs. It is compile-checked
with nvcc for sm_90a when nvcc is installed; nothing here runs it.

    >>> from fuseflow.gpu.benchmarks import BENCHMARKS
    >>> from fuseflow.gpu.planner import plan_chain
    >>> src = emit_cuda(BENCHMARKS["G1"], plan_chain(BENCHMARKS["G1"], topk=1).plans[0])
    >>> "map_shared_rank" in src and "cudaLaunchAttributeClusterDimension" in src
    True
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from fuseflow.errors import NotSupported

from .chains import Chain
from .device import Device

THREADS = 256
NVCC_CANDIDATES = ("/usr/local/cuda/bin/nvcc",)

_ACT = {
    "relu": "fmaxf(x, 0.0f)",
    "silu": "x / (1.0f + __expf(-x))",
    "gelu": "0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)))",
}


def structural_smem_bytes(chain: Chain, plan) -> int:
    """Dynamic SMEM of the generated kernel: FP32 GEMM0 partials, the C' tile and two ring
    buffers (FP16), and the FP32 E partial."""
    bm, bn, _, bl = plan.blk
    nacc = 2 if plan.strategy == "sequential" else 1
    return nacc * bm * bn * 4 + 3 * bm * bn * 2 + bm * bl * 4


def supported(chain: Chain, plan, device: Device | None = None) -> str | None:
    """None if emit_cuda handles the plan, else the reason it does not."""
    device = device or Device()
    if plan.placement["C"] != "-" or plan.placement["E_acc"] != "-":
        return (f"the plan holds C in {plan.placement['C']} / the E accumulator in {plan.placement['E_acc']} "
                "across a loop; code generation covers plans that hold neither")
    if structural_smem_bytes(chain, plan) > device.smem_per_block:
        return "the generated kernel's buffers exceed one block's shared memory"
    return None


def emit_cuda(chain: Chain, plan, name: str = "fused", device: Device | None = None, header: bool = True) -> str:
    """CUDA C++ for ``plan`` inside ``namespace name``, with a host launcher ``name::launch``
    (``header=False`` leaves out the #includes, to put several plans in one file)."""
    reason = supported(chain, plan, device)
    if reason:
        raise NotSupported(reason, f"plan {plan.schedule.name} cls {plan.cls}")
    M, N, K, L = chain.dims
    PM, PN, PK, PL = chain.padded
    cm, cn, ck, cl = plan.cls
    bm, bn, bk, bl = plan.blk
    spatial = [d for d in "MN" if d in plan.schedule.spatial]
    temporal = [d for d in plan.schedule.temporal if d != "K"]
    var = {"M": "m", "N": "n", "L": "l"}
    decode, div = [], "cid"
    for d in spatial:
        decode.append(f"  const int {var[d]} = {div} % t{d};")
        div = f"({div} / t{d})"
    loops = "".join(f"{'  ' * (i + 1)}for (int {var[d]} = 0; {var[d]} < t{d}; ++{var[d]})\n"
                    for i, d in enumerate(temporal))
    n_first = "true" if "N" in spatial else "(n == 0)"
    n_last = "true" if "N" in spatial else "(n == tN - 1)"
    reduce_e = "N" in spatial and PN // (cn * bn) > 1
    act = "silu" if chain.gated else chain.act
    body = _TEMPLATE
    for key, value in {
        "NAME": name, "CHAIN": chain.describe(), "PLAN": plan.summary().strip(),
        "M_": M, "N_": N, "K_": K, "L_": L, "PM": PM, "PN": PN, "PK": PK, "PL": PL,
        "CMv": cm, "CNv": cn, "CKv": ck, "CLv": cl, "BMv": bm, "BNv": bn, "BKv": bk, "BLv": bl,
        "GATED": str(chain.gated).lower(), "SPATIAL": str(plan.strategy == "spatial").lower(),
        "SEQ": str(plan.strategy == "sequential").lower(), "REDUCE_E": str(reduce_e).lower(),
        "ACT": _ACT[act], "THREADS": THREADS, "CLUSTERS": plan.clusters,
        "DECODE": "\n".join(decode) or "  (void)cid;", "LOOPS": loops or "  {\n",
        "DECL": "".join(f"  int {var[d]} = 0;\n" for d in "MNL" if d not in spatial and d not in temporal),
        "NFIRST": n_first, "NLAST": n_last,
    }.items():
        body = body.replace(f"@{key}@", str(value))
    return HEADER + body if header else body


def find_nvcc() -> str | None:
    """Path of nvcc, or None."""
    found = shutil.which("nvcc")
    if found:
        return found
    return next((p for p in NVCC_CANDIDATES if os.path.exists(p)), None)


def nvcc_check(source: str, nvcc: str | None = None, arch: str = "sm_90a", timeout: int = 240) -> tuple[bool, str]:
    """Compile ``source`` to an object file (not run); (ok, compiler output)."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        return False, "nvcc not found"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "plan.cu")
        with open(path, "w") as handle:
            handle.write(source)
        proc = subprocess.run([nvcc, f"-arch={arch}", "-std=c++17", "-c", path, "-o", os.path.join(tmp, "plan.o")],
                              capture_output=True, text=True, timeout=timeout)
    return proc.returncode == 0, proc.stdout + proc.stderr


HEADER = "#include <cuda_fp16.h>\n#include <cuda_runtime.h>\n#include <cooperative_groups.h>\n"

_TEMPLATE = r"""
// @CHAIN@
// plan: @PLAN@
namespace @NAME@ {
namespace cg = cooperative_groups;

constexpr int M_ = @M_@, N_ = @N_@, K_ = @K_@, L_ = @L_@;          // real extents
constexpr int CM = @CMv@, CN = @CNv@, CK = @CKv@, CL = @CLv@;       // cluster shape
constexpr int BM = @BMv@, BN = @BNv@, BK = @BKv@, BL = @BLv@;       // block tile
constexpr bool GATED = @GATED@, SPATIAL = @SPATIAL@, SEQ = @SEQ@, REDUCE_E = @REDUCE_E@;
constexpr int SH = CL / CK, CR = CN / SH, BLOCKS = CM * CN * CK, NT = @THREADS@;
constexpr int TM = CM * BM, TN = CN * BN, TK = (SPATIAL ? 1 : CK) * BK, TL = CL * BL;
constexpr int tM = @PM@ / TM, tN = @PN@ / TN, tK = @PK@ / TK, tL = @PL@ / TL;
constexpr int NACC = SEQ ? 2 : 1, CLUSTERS = @CLUSTERS@;
constexpr size_t SMEM_BYTES = size_t(NACC) * BM * BN * 4 + 3 * size_t(BM) * BN * 2 + size_t(BM) * BL * 4;
static_assert(SMEM_BYTES <= 232448, "buffers exceed 227 KB of shared memory per block");
static_assert(SH * CR == CN && CK * SH == CL && BLOCKS <= 16, "illegal cluster shape");

__device__ __forceinline__ float act(float x) { return @ACT@; }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

__global__ void __launch_bounds__(NT) kernel(const half* __restrict__ A, const half* __restrict__ B0,
                                             const half* __restrict__ B1, const half* __restrict__ D,
                                             half* __restrict__ E) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* accC = reinterpret_cast<float*>(smem);                 // [NACC][BM*BN] GEMM0 partials
  half* cw = reinterpret_cast<half*>(accC + NACC * BM * BN);    // activated C' tile
  half* ring = cw + BM * BN;                                    // [2][BM*BN] shuffle ring
  float* accE = reinterpret_cast<float*>(ring + 2 * BM * BN);   // [BM*BL] E partial
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = cluster.block_rank(), tid = threadIdx.x;
  const int im = rank / (CN * CK), in_ = (rank / CK) % CN, ik = rank % CK;   // GEMM0 role
  const int j = in_ % SH, ir = in_ / SH, il = ik * SH + j;                   // GEMM1 role
  const int cid = blockIdx.x / BLOCKS;
@DECODE@
@DECL@  int cm_prev = -1, cn_prev = -1;
@LOOPS@  {
    if (m != cm_prev || n != cn_prev) {          // GEMM0 for a new C tile
      for (int i = tid; i < NACC * BM * BN; i += NT) accC[i] = 0.0f;
      for (int k = 0; k < tK; ++k) {
        const int k0 = k * TK + (SPATIAL ? 0 : ik * BK);
        for (int i = tid; i < BM * BN; i += NT) {
          const int gr = m * TM + im * BM + i / BN, gc = n * TN + in_ * BN + i % BN;
          if (gr >= M_ || gc >= N_) continue;
          float s0 = 0.0f, s1 = 0.0f;
          for (int kk = 0; kk < BK && k0 + kk < K_; ++kk) {
            const float a = __half2float(A[gr * K_ + k0 + kk]);
            const half* b = (SPATIAL && ik == 1) ? B1 : B0;
            s0 += a * __half2float(b[(k0 + kk) * N_ + gc]);
            if (SEQ) s1 += a * __half2float(B1[(k0 + kk) * N_ + gc]);
          }
          accC[i] += s0;
          if (SEQ) accC[BM * BN + i] += s1;
        }
      }
      cluster.sync();
      if (SPATIAL) {                             // dsm_all_exchange (Mul): swap the branch results
        const float* peer = cluster.map_shared_rank(accC, rank ^ 1);
        for (int i = tid; i < BM * BN; i += NT) {
          const float g = ik == 0 ? accC[i] : peer[i], u = ik == 0 ? peer[i] : accC[i];
          cw[i] = __float2half(silu(g) * u);
        }
      } else {                                   // dsm_all_exchange (Add): reduce-scatter, then all-gather
        constexpr int W = BN / CK;
        for (int i = tid; i < BM * W; i += NT) {
          const int idx = (i / W) * BN + ik * W + i % W;
          float g = 0.0f, u = 0.0f;
          for (int p = 0; p < CK; ++p) {
            const float* part = cluster.map_shared_rank(accC, rank - ik + p);
            g += part[idx];
            if (SEQ) u += part[BM * BN + idx];
          }
          cw[idx] = __float2half(GATED ? silu(g) * u : act(g));
        }
        cluster.sync();
        for (int q = 0; q < CK; ++q) {
          if (q == ik) continue;
          const half* peer = cluster.map_shared_rank(cw, rank - ik + q);
          for (int i = tid; i < BM * W; i += NT) {
            const int idx = (i / W) * BN + q * W + i % W;
            cw[idx] = peer[idx];
          }
        }
      }
      cluster.sync();
      cm_prev = m; cn_prev = n;
    }
    if (@NFIRST@)
      for (int i = tid; i < BM * BL; i += NT) accE[i] = 0.0f;
    for (int i = tid; i < BM * BN; i += NT) ring[i] = cw[i];
    cluster.sync();
    for (int s = 0; s < SH; ++s) {               // GEMM1 with the dsm_shuffle ring
      const half* cur = ring + (s & 1) * BM * BN;
      const int src_n = ir * SH + (j + s) % SH;
      for (int i = tid; i < BM * BL; i += NT) {
        const int gl = l * TL + il * BL + i % BL;
        if (gl >= L_) continue;
        float acc = 0.0f;
        for (int c = 0; c < BN; ++c) {
          const int gn = n * TN + src_n * BN + c;
          if (gn < N_) acc += __half2float(cur[(i / BL) * BN + c]) * __half2float(D[gn * L_ + gl]);
        }
        accE[i] += acc;
      }
      cluster.sync();
      if (s + 1 < SH) {
        const int nb = im * CN * CK + (ir * SH + (j + 1) % SH) * CK + ik;
        const half* src = cluster.map_shared_rank(ring + (s & 1) * BM * BN, nb);
        half* dst = ring + ((s + 1) & 1) * BM * BN;
        for (int i = tid; i < BM * BN; i += NT) dst[i] = src[i];
        cluster.sync();
      }
    }
    if (@NLAST@) {                               // dsm_reduce_scatter, then store / inter-cluster reduce
      constexpr int W = BL / CR;
      for (int i = tid; i < BM * W; i += NT) {
        const int r = i / W, c = ir * W + i % W;
        const int gr = m * TM + im * BM + r, gl = l * TL + il * BL + c;
        float sum = 0.0f;
        for (int p = 0; p < CR; ++p) {
          const int peer = im * CN * CK + (p * SH + j) * CK + ik;
          sum += cluster.map_shared_rank(accE, peer)[r * BL + c];
        }
        if (gr < M_ && gl < L_) {
          if (REDUCE_E) atomicAdd(E + gr * L_ + gl, __float2half(sum));
          else E[gr * L_ + gl] = __float2half(sum);
        }
      }
      cluster.sync();
    }
  }
}

// Launch on a stream; E must not alias the inputs. Returns the CUDA error of the launch.
inline cudaError_t launch(const half* A, const half* B0, const half* B1, const half* D, half* E,
                          cudaStream_t stream = 0) {
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(SMEM_BYTES));
  if (err == cudaSuccess && BLOCKS > 8)
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (err == cudaSuccess && REDUCE_E) err = cudaMemsetAsync(E, 0, sizeof(half) * M_ * L_, stream);
  if (err != cudaSuccess) return err;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(CLUSTERS * BLOCKS);
  cfg.blockDim = dim3(NT);
  cfg.dynamicSmemBytes = SMEM_BYTES;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = BLOCKS;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, A, B0, B1, D, E);
}
}  // namespace @NAME@
"""
