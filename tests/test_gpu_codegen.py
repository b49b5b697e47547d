"""CUDA emission for plans; compile-checked with nvcc (sm_90a) when it is installed."""
import argparse

import pytest

from fuseflow.errors import NotSupported
from fuseflow.gpu.benchmarks import BENCHMARKS
from fuseflow.gpu.chains import Chain
from fuseflow.gpu.cli import add_commands
from fuseflow.gpu.codegen import HEADER, emit_cuda, find_nvcc, nvcc_check
from fuseflow.gpu.device import Device
from fuseflow.gpu.planner import make_plan, plan_chain
from fuseflow.gpu.schedules import parse_schedule


def best(name, **kw):
    return plan_chain(BENCHMARKS[name], topk=1, **kw).plans[0]


def test_source_carries_the_plan_shape():
    chain = Chain("t", "ffn", 256, 512, 64, 256, act="gelu")
    plan = make_plan(chain, Device(), parse_schedule("[N] M,L,K"), "standard", (2, 4, 2, 4), (64, 64, 32, 64))
    src = emit_cuda(chain, plan)
    for text in ("CM = 2, CN = 4, CK = 2, CL = 4", "BM = 64, BN = 64, BK = 32, BL = 64",
                 "REDUCE_E = true",      # N split over 512 / (4*64) = 2 clusters: atomic reduction
                 "attr[0].val.clusterDim.x = BLOCKS", "tanhf", "map_shared_rank"):
        assert text in src
    assert "for (int m = 0; m < tM; ++m)" in src and "const int n = cid % tN;" in src


def test_plans_that_hold_a_tensor_are_not_supported():
    chain = Chain("t", "ffn", 32, 64, 32, 64)
    plan = make_plan(chain, Device(), parse_schedule("[M] L,N,K"), "standard", (1, 1, 1, 1), (16,) * 4)
    assert plan.placement["C"] != "-"
    with pytest.raises(NotSupported, match="holds C"):
        emit_cuda(chain, plan)


def test_cli_writes_cuda(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="fuseflow")
    add_commands(parser.add_subparsers(dest="command", required=True))
    out = tmp_path / "g1.cu"
    args = parser.parse_args(["gpu", "plan", "--chain", "G1", "--topk", "1", "--emit-cuda", str(out)])
    assert args.run(args) == 0
    assert "wrote" in capsys.readouterr().out and "__global__" in out.read_text()


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed: CUDA sources are not compile-checked")
def test_emitted_sources_compile_for_sm90a():
    # one translation unit with a standard, a gated-sequential and a gated-spatial plan
    parts = [HEADER, emit_cuda(BENCHMARKS["G1"], best("G1"), name="g1", header=False)]
    for strategy in ("sequential", "spatial"):
        plan = best("S8", strategies=(strategy,))
        parts.append(emit_cuda(BENCHMARKS["S8"], plan, name=f"s8_{strategy}", header=False))
    ok, log = nvcc_check("\n".join(parts))
    assert ok, log
