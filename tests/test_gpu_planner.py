"""Search engine: ranking, top-K, Rule 5, speed, baselines."""
import dataclasses
import time

import pytest

from fuseflow.errors import UserError
from fuseflow.gpu.planning.baselines import smem_only, unfused
from fuseflow.gpu.planning.loop_schedules import parse_schedule
from fuseflow.gpu.planning.planner import DEFAULT_TOPK, make_plan, plan_chain
from fuseflow.gpu.problem.benchmarks import BENCHMARKS, GPT67B_EXAMPLE
from fuseflow.gpu.problem.chains import Chain
from fuseflow.gpu.problem.device import Device

MiB = 2**20


def test_default_topk_is_11_and_plans_are_sorted_and_distinct():
    result = plan_chain(BENCHMARKS["G4"])
    assert DEFAULT_TOPK == 11 and len(result.plans) == DEFAULT_TOPK
    costs = [p.cost for p in result.plans]
    assert costs == sorted(costs)
    keys = {(p.strategy, p.schedule, p.cls, tuple(p.volumes.values())) for p in result.plans}
    assert len(keys) == len(result.plans)


def test_plans_respect_capacity_and_rule5_count_matches_analysis():
    device = Device()
    result = plan_chain(BENCHMARKS["C5"], device, topk=5)
    for p in result.plans:
        assert p.smem_used <= device.smem_per_block and p.reg_used <= device.reg_per_block
        assert p.placement["C"] != "global"
    assert 0 < result.counts["rule5"] <= result.counts["rule4"]


def test_pruned_gpt67b_space_ranks_in_seconds():
    start = time.perf_counter()
    result = plan_chain(GPT67B_EXAMPLE)
    elapsed = time.perf_counter() - start
    assert result.counts["rule4"] > 5e5            # the analyzer evaluates every Rule-4 survivor
    assert elapsed < 10, elapsed                    # vectorized: about a second here


def test_memory_only_ranking_ignores_tensor_cores():
    chain = BENCHMARKS["C2"]
    with_c = plan_chain(chain, topk=1).plans[0]
    mem = plan_chain(chain, topk=1, compute=False).plans[0]
    assert mem.cost <= with_c.cost
    assert mem.cost == max(mem.times[lv] for lv in ("global", "l2", "dsm", "smem", "reg"))


def test_fused_best_plan_reaches_compulsory_dram_traffic_on_g5():
    # spec 1.6: A, B, D read once and E written once is 258 MiB for G5 (FP16)
    chain = BENCHMARKS["G5"]
    compulsory = (chain.M * chain.K + chain.K * chain.N + chain.N * chain.L + chain.M * chain.L) * 2
    assert compulsory == 258 * MiB
    assert plan_chain(chain, topk=1).plans[0].volumes["global"] == compulsory


def test_unfused_adds_the_intermediate_round_trip():
    chain = BENCHMARKS["G5"]
    compulsory = (chain.M * chain.K + chain.K * chain.N + chain.N * chain.L + chain.M * chain.L) * 2
    c_bytes = chain.M * chain.N * 2                 # 4 MiB of FP16 C, written then read back
    assert unfused(chain).volumes["global"] == compulsory + 2 * c_bytes == 266 * MiB


def test_unfused_gated_runs_three_kernels():
    chain = BENCHMARKS["S8"]
    base = unfused(chain)
    assert [k.name for k in base.kernels] == ["gemm0", "silu_mul", "gemm1"]
    c_bytes = chain.M * chain.N * 2
    # the elementwise kernel reads both branch outputs and writes their product
    assert base.kernels[1].volumes["global"] == 3 * c_bytes


def test_smem_only_fusion_fails_when_the_resident_tile_exceeds_one_block():
    # G5: the C strip (blk_m x 16384 FP16) or the E accumulator (blk_m x 4096 FP32) must stay in one
    # block; even blk_m = 16 needs 16*4096*4 = 256 KiB > 227 KiB of SMEM
    assert 16 * 4096 * 4 > Device().smem_per_block
    assert not smem_only(BENCHMARKS["G5"]).fused
    small = smem_only(BENCHMARKS["G1"])            # G1's 128 x 512 intermediate fits
    assert small.fused and small.plan.cls == (1, 1, 1, 1) and small.volumes["dsm"] == 0


def test_cluster_fusion_beats_unfused_where_smem_only_fails():
    chain = BENCHMARKS["G5"]
    fused = plan_chain(chain, topk=1).plans[0]
    assert fused.cost < unfused(chain).cost


def test_make_plan_rejects_illegal_input():
    chain = Chain("t", "ffn", 64, 64, 64, 64)
    sched = parse_schedule("[M] N,L,K")
    with pytest.raises(UserError, match="Rule 2"):
        make_plan(chain, Device(), sched, "standard", (4, 4, 4, 4), (16,) * 4)
    with pytest.raises(UserError, match="divide"):
        make_plan(chain, Device(), sched, "standard", (1, 1, 1, 1), (48, 16, 16, 16))
    with pytest.raises(UserError, match="Rule 3 or 4"):
        make_plan(chain, Device(), parse_schedule("[K] M,N,L"), "standard", (1,) * 4, (16,) * 4)
    with pytest.raises(UserError, match="topk"):
        plan_chain(chain, topk=0)


def test_no_plan_when_device_is_too_small():
    tiny = dataclasses.replace(Device(), smem_per_block=1024)
    assert plan_chain(BENCHMARKS["G1"], tiny).plans == []
