"""CUDA emission for plans: the kernel's layout checked in numpy, the source compile-checked with nvcc
(sm_90a) when it is installed, its resources held to the block's budget."""
import argparse

import numpy as np
import pytest

from fuseflow.cmdline.gpu import add_commands
from fuseflow.errors import NotSupported
from fuseflow.gpu.emulation.kernel_emulator import emulate, random_inputs, reference
from fuseflow.gpu.kernels.codegen import HEADER, emit_cuda, launcher_name
from fuseflow.gpu.kernels.covering_plans import covering_set, feature_values, ranked_layouts
from fuseflow.gpu.kernels.kernel_layout import THREADS, kernel_layout
from fuseflow.gpu.kernels.nvcc import compile_cuda, find_nvcc
from fuseflow.gpu.planning.loop_schedules import parse_schedule
from fuseflow.gpu.planning.planner import make_plan, plan_chain
from fuseflow.gpu.problem.benchmarks import BENCHMARKS
from fuseflow.gpu.problem.chains import Chain
from fuseflow.gpu.problem.device import Device

NO_NVCC = "nvcc is not installed: CUDA sources are not compile-checked"


def test_source_carries_the_plan_shape():
    chain = Chain("t", "ffn", 256, 512, 64, 256, act="gelu")
    plan = make_plan(chain, Device(), parse_schedule("[N] M,L,K"), "standard", (2, 4, 2, 4), (64, 64, 32, 64))
    src = emit_cuda(chain, plan, name="t1")
    for text in ("CM = 2, CN = 4, CK = 2, CL = 4", "BM = 64, BN = 64, BK = 32, BL = 64",
                 "REDUCE_E = true",      # N split over 512 / (4*64) = 2 clusters: reduction into E
                 "attr[0].val.clusterDim.x = BLOCKS", "tanhf", "map_shared_rank", "wmma::mma_sync",
                 "cp_async_bulk(ptx::space_cluster, ptx::space_global, dst, src, bytes, bar, mask)",
                 launcher_name("t1")):
        assert text in src
    assert "for (int m = 0; m < tM; ++m)" in src and "const int n = cid % tN;" in src


def test_plans_that_hold_a_tensor_are_not_supported():
    chain = Chain("t", "ffn", 32, 64, 32, 64)
    plan = make_plan(chain, Device(), parse_schedule("[M] L,N,K"), "standard", (1, 1, 1, 1), (16,) * 4)
    assert plan.placement["C"] != "-"
    with pytest.raises(NotSupported, match="holds C"):
        emit_cuda(chain, plan)


def test_ragged_inner_extents_are_refused():
    chain = Chain("t", "ffn", 32, 72, 32, 64)
    plan = plan_chain(chain, topk=1).plans[0]
    with pytest.raises(NotSupported, match="N=72 is not a multiple of 16"):
        emit_cuda(chain, plan)


def test_cli_writes_cuda(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="fuseflow")
    add_commands(parser.add_subparsers(dest="command", required=True))
    out = tmp_path / "g1.cu"
    args = parser.parse_args(["gpu", "plan", "--chain", "G1", "--topk", "1", "--emit-cuda", str(out)])
    assert args.run(args) == 0
    assert "wrote" in capsys.readouterr().out and "__global__" in out.read_text()


SMALL = Device(smem_per_block=48 * 1024, reg_per_block=32 * 1024)   # small: held tensors, other tilings


@pytest.mark.parametrize("chain", [Chain("a", "ffn", 40, 128, 64, 64, act="gelu"), Chain("b", "gated", 32, 128, 64, 64),
                                   Chain("c", "ffn", 96, 64, 96, 256, act="silu")], ids=lambda c: c.name)
@pytest.mark.parametrize("device", [Device(), SMALL], ids=["h100", "small"])
def test_kernel_layout_runs_every_ranked_plan_in_numpy(chain, device):
    """The kernel's copies, barrier byte counts, exchanges, ring and reduce-scatter, run in numpy, give
    the chain's output for every plan the planner lists (both gated strategies, ragged M, clusters to 16)."""
    inputs = random_inputs(chain, seed=3)
    want = reference(chain, *inputs)
    listed = ranked_layouts([chain], topk=11, device=device)
    assert len(listed) >= 6
    for item in listed:
        run = emulate(item.layout, *inputs)
        assert np.abs(run.E - want).max() < 2e-2 * np.abs(want).max(), item.plan.summary()
        assert run.checked_barriers > 0


def test_emulation_catches_a_wrong_multicast_mask():
    chain = Chain("t", "ffn", 64, 128, 64, 64)
    lay = next(it.layout for it in ranked_layouts([chain], topk=11) if it.layout.features()["multicast_b"])
    broken = type(lay).b_copies

    def drop_last_block(self, n, k):
        return [c.__class__(c.tensor, c.issuer, c.mask & ~(1 << (self.blocks - 1)), c.rows, c.col0, c.row_elems)
                for c in broken(self, n, k)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(lay), "b_copies", drop_last_block)
        with pytest.raises(AssertionError, match="expects"):
            emulate(lay, *random_inputs(chain))


def test_bf16_layout_rounds_like_bf16():
    chain = Chain("t", "ffn", 32, 64, 32, 32)
    lay = kernel_layout(chain, plan_chain(chain, topk=1).plans[0], dtype="bf16")
    inputs = random_inputs(chain, dtype="bf16")
    run = emulate(lay, *inputs)
    assert np.abs(run.E - reference(chain, *inputs, "bf16")).max() < 5e-2
    assert "__nv_bfloat16" in emit_cuda(chain, plan_chain(chain, topk=1).plans[0], dtype="bf16")


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason=NO_NVCC)
def test_every_kernel_code_path_compiles_for_sm90a_within_budget():
    """One translation unit with a set of the 26 chains' top-11 plans that takes every code path any of
    them takes (strategies, exchange, shuffle, reduce-scatter, multicasts, reductions, ragged M, each
    cluster size, each loop nest), plus a BF16 kernel; ptxas's report is held to one block per SM."""
    listed = ranked_layouts(BENCHMARKS.values(), topk=11)
    assert len(listed) >= 280                      # of 286: two hold C in registers across a loop
    picked = covering_set(listed)
    assert feature_values(picked) == feature_values(listed)
    parts = [HEADER] + [emit_cuda(it.chain, it.plan, name=f"k{i}", header=False) for i, it in enumerate(picked)]
    parts.append(emit_cuda(picked[0].chain, picked[0].plan, name="kbf16", header=False, dtype="bf16"))
    result = compile_cuda("\n".join(parts))
    assert result.ok, result.log[-4000:]
    assert len(result.kernels) == len(picked) + 1
    device = Device()
    for i, it in enumerate(picked):
        res = next(v for k, v in result.kernels.items() if f"k{i}6kernel" in k)
        assert res.registers * 4 * THREADS <= 256 * 1024, (it.chain.name, res)    # the SM's register file
        assert res.static_smem + it.layout.smem_bytes <= device.smem_per_block, (it.chain.name, res)
        assert res.spill_stores == 0, (it.chain.name, it.plan.summary(), res)


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason=NO_NVCC)
def test_library_loads_and_its_launcher_reports_cuda_errors():
    """The runner's path up to the GPU: a chain's plans built as one shared library, loaded with ctypes,
    each launcher found by name; with no usable GPU here the launch returns a CUDA error, raised."""
    import ctypes

    import torch

    from fuseflow.gpu.kernels.codegen import emit_library
    from fuseflow.gpu.measuring.kernel_runner import kernel_launcher
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the launch would run (gpu run covers that)")
    chain = Chain("t", "ffn", 64, 128, 64, 64)
    source, names = emit_library(chain, enumerate(plan_chain(chain, topk=2).plans, 1))
    built = compile_cuda(source, shared=True)
    assert built.ok, built.log[-3000:]
    lib = ctypes.CDLL(built.output)

    class Null:
        def data_ptr(self):
            return 0
    for name in names.values():
        with pytest.raises(RuntimeError, match=f"launch of {name} failed with CUDA error [1-9]"):
            kernel_launcher(lib, name, (Null(), Null(), None, Null(), Null()), 0)()
