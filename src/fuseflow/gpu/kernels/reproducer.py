"""A standalone reproducer of one plan's kernel: the kernel's CUDA source with a ``main`` that fills the
inputs on the GPU, launches it once, synchronises and prints the CUDA error (or a checksum of E), and
the launch parameters that go with it. It needs no Python or PyTorch, so compute-sanitizer runs it fast.

    >>> from fuseflow.gpu.problem.benchmarks import BENCHMARKS
    >>> from fuseflow.gpu.planning.planner import plan_chain
    >>> plan = plan_chain(BENCHMARKS["G1"], topk=1).plans[0]
    >>> launch = launch_params(BENCHMARKS["G1"], plan)
    >>> launch.grid_blocks == launch.clusters * launch.cluster_blocks, launch.threads
    (True, 256)
    >>> "int main(" in emit_reproducer(BENCHMARKS["G1"], plan)
    True
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..problem.chains import Chain
from ..problem.device import Device
from .codegen import emit_cuda, launcher_name
from .kernel_layout import THREADS, KernelLayout, kernel_layout
from .nvcc import ARCH_FLAGS

MAIN = r"""
#include <cstdio>
__global__ void fuseflow_fill(@ELEM@* p, size_t n, unsigned seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    p[i] = @TO_T@((float(h & 0xffffu) / 32768.0f - 1.0f) * scale);
  }
}
static @ELEM@* alloc_fill(size_t n, unsigned seed, float scale) {
  @ELEM@* p = nullptr;
  if (cudaMalloc(&p, n * sizeof(@ELEM@)) != cudaSuccess) return nullptr;
  fuseflow_fill<<<256, 256>>>(p, n, seed, scale);
  return p;
}
int main() {
  const size_t M = @M@, N = @N@, K = @K@, L = @L@;
  @ELEM@* A = alloc_fill(M * K, 1u, 1.0f);
  @ELEM@* B0 = alloc_fill(K * N, 2u, 1.0f / @SQRTK@f);
  @ELEM@* B1 = @GATED@ ? alloc_fill(K * N, 3u, 1.0f / @SQRTK@f) : nullptr;
  @ELEM@* D = alloc_fill(N * L, 4u, 1.0f / @SQRTN@f);
  @ELEM@* E = alloc_fill(M * L, 5u, 0.0f);
  if (!A || !B0 || !D || !E || (@GATED@ && !B1)) { std::printf("allocation failed\n"); return 1; }
  cudaError_t err = cudaDeviceSynchronize();
  if (err == cudaSuccess) err = cudaError_t(@LAUNCH@(A, B0, B1, D, E, nullptr, nullptr));
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) { std::printf("CUDA error %d: %s\n", int(err), cudaGetErrorString(err)); return 1; }
  @ELEM@* host = new @ELEM@[M * L];
  cudaMemcpy(host, E, M * L * sizeof(@ELEM@), cudaMemcpyDeviceToHost);
  double sum = 0.0;
  for (size_t i = 0; i < M * L; ++i) sum += double(@TO_F_HOST@(host[i]));
  std::printf("ok: grid @GRID@ blocks, clusters of @CLUSTER@, @SMEM@ bytes shared memory; sum(E) = %.6g\n", sum);
  delete[] host;
  return 0;
}
"""


@dataclass(frozen=True)
class LaunchParams:
    """How a plan's kernel is launched: what a failure report gives beside the plan."""

    chain: str
    dims: tuple          # M, N, K, L
    dtype: str
    plan: str
    grid_blocks: int
    clusters: int
    cluster_blocks: int  # blocks per cluster (cluster dimension x)
    cluster_shape: tuple  # cls m, n, k, l
    block_tile: tuple    # the kernel's blk m, n, k, l (K step widened where K allows)
    threads: int
    smem_bytes: int

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "LaunchParams":
        return cls(**{**data, "dims": tuple(data["dims"]), "cluster_shape": tuple(data["cluster_shape"]),
                      "block_tile": tuple(data["block_tile"])})

    def line(self) -> str:
        """One line, e.g. for a failure report."""
        return (f"{self.chain} {','.join(map(str, self.dims))} {self.dtype}: grid {self.grid_blocks} blocks = "
                f"{self.clusters} clusters x {self.cluster_blocks}, cls {self.cluster_shape}, blk {self.block_tile}, "
                f"{self.threads} threads, {self.smem_bytes} B dynamic shared memory; plan {self.plan}")


def launch_params(chain: Chain, plan, device: Device | None = None, dtype: str = "fp16") -> LaunchParams:
    """The launch of ``plan``'s kernel (NotSupported where the generator cannot build it)."""
    return launch_of(kernel_layout(chain, plan, device, dtype), plan)


def launch_of(lay: KernelLayout, plan) -> LaunchParams:
    """The launch of a kernel whose layout is known."""
    return LaunchParams(lay.chain.name, tuple(lay.chain.dims), lay.dtype, plan.summary().strip(),
                        lay.clusters * lay.blocks, lay.clusters, lay.blocks, tuple(lay.cls), tuple(lay.blk), THREADS,
                        lay.smem_bytes)


def emit_reproducer(chain: Chain, plan, device: Device | None = None, dtype: str = "fp16") -> str:
    """The plan's kernel and a ``main`` that launches it once (compile with :func:`build_command`)."""
    launch = launch_params(chain, plan, device, dtype)
    elem, to_f, to_t = {"fp16": ("half", "__half2float", "__float2half"),
                        "bf16": ("__nv_bfloat16", "__bfloat162float", "__float2bfloat16")}[dtype]
    M, N, K, L = chain.dims
    values = {"ELEM": elem, "TO_T": to_t, "TO_F_HOST": to_f, "M": M, "N": N, "K": K, "L": L,
              "SQRTK": f"{K ** 0.5:.6f}", "SQRTN": f"{N ** 0.5:.6f}", "GATED": str(chain.gated).lower(),
              "LAUNCH": launcher_name("repro"), "GRID": launch.grid_blocks, "CLUSTER": launch.cluster_blocks,
              "SMEM": launch.smem_bytes}
    main = MAIN
    for key, value in values.items():
        main = main.replace(f"@{key}@", str(value))
    return emit_cuda(chain, plan, name="repro", device=device, dtype=dtype) + main


def build_command(source: str, exe: str, nvcc: str = "nvcc") -> list[str]:
    """The nvcc command line that builds a reproducer executable for sm_90a."""
    return [nvcc, *ARCH_FLAGS, "-std=c++17", "-O3", "-lineinfo", source, "-o", exe]
