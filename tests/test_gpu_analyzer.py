"""Analyzer formulas against hand derivations and the paper's worked examples."""
import numpy as np
import pytest

from fuseflow.gpu.planning.loop_schedules import parse_schedule
from fuseflow.gpu.planning.planner import make_plan
from fuseflow.gpu.planning.search_space import Candidates, candidates, legal_schedules
from fuseflow.gpu.planning.traffic import TIERS, analyze, footprints, keep_reuse
from fuseflow.gpu.problem.chains import Chain
from fuseflow.gpu.problem.device import Device


def test_chimera_dv_example_order_mlkn():
    # Chimera's naming: C[M,L] = A[M,K] B[K,L]; E[M,N] = C D[L,N]; order m,l,k,n (outer -> inner)
    TM, TL, M, L = 4, 8, 64, 256
    t = {"M": np.array([M // TM]), "L": np.array([L // TL]), "K": np.array([3]), "N": np.array([5])}
    gemm1, gemm2 = ["M", "L", "K"], ["M", "L", "N"]   # each op's loops; K is private to GEMM1
    # expected factors: A (MK) x ceil(L/T_L), B (KL) x ceil(M/T_M), D (LN) x ceil(M/T_M), E (MN) x ceil(L/T_L)
    assert keep_reuse("MK", [], gemm1, t)[0] == L // TL
    assert keep_reuse("KL", [], gemm1, t)[0] == M // TM
    assert keep_reuse("LN", [], gemm2, t)[0] == M // TM
    assert keep_reuse("MN", [], gemm2, t)[0] == L // TL


def test_fig9_footprints():
    chain = Chain("g", "ffn", 128, 16384, 4096, 4096)
    blk = (64, 128, 64, 128)
    mlnk = footprints(chain, parse_schedule("[M] L,N,K"), "standard", (1, 1, 1, 1), blk)
    mnlk = footprints(chain, parse_schedule("[M] N,L,K"), "standard", (1, 1, 1, 1), blk)
    assert mlnk == {"C": 64 * chain.N, "E_acc": 64 * 128}   # C row strip blk_m x N
    assert mnlk == {"C": 64 * 128, "E_acc": 64 * chain.L}   # E accumulator blk_m x L


def test_whole_problem_in_one_cluster_moves_only_compulsory_bytes():
    chain = Chain("t", "ffn", 64, 64, 64, 64)
    dev = Device()
    a = analyze(chain, dev, parse_schedule("[MN] L,K"), "standard", Candidates.single((1, 1, 1, 1), (64, 64, 64, 64)))
    e = dev.in_bytes
    compulsory = (64 * 64) * 4 * e   # A, B, D read once, E written once, all 64x64 fp16
    assert a.vol["l2"][0] == a.vol["global"][0] == compulsory
    assert a.vol["dsm"][0] == 0 and a.vol["reg"][0] == 0
    # SMEM: every loaded tile written once by TMA and read once by an MMA; C' read once by GEMM1
    assert a.vol["smem"][0] == 2 * 3 * 64 * 64 * e + 64 * 64 * e


def test_dsm_primitive_volumes_for_fig7_cluster():
    chain = Chain("t", "ffn", 256, 512, 256, 512)
    dev = Device()
    cls, blk = (2, 4, 2, 4), (128, 128, 128, 128)   # Fig. 7: cls_shuffle 2, cls_reduce 2
    p = make_plan(chain, dev, parse_schedule("[M] L,N,K"), "standard", cls, blk)
    M, N, L = chain.M, chain.N, chain.L
    tL = L // (4 * 128)
    # all_exchange: FP32 reduce-scatter + FP16 all-gather among cls_k = 2 copies of every C element
    assert p.parts["dsm_exchange"] == M * N * (2 - 1) * (4 + 2)
    # shuffle: each of the cls_k copies passes (cls_shuffle - 1) tiles per L pass
    assert p.parts["dsm_shuffle"] == M * N * 2 * 2 * (2 - 1) * tL
    # reduce-scatter of FP32 E partials between cls_reduce = 2 groups, once per E tile
    assert p.parts["dsm_reduce_scatter"] == M * L * 4 * (2 - 1)


def test_gated_spatial_exchange_sends_each_branch_once():
    chain = Chain("s", "gated", 64, 128, 64, 64)
    p = make_plan(chain, Device(), parse_schedule("[M] N,L,K"), "spatial", (1, 1, 2, 2), (32, 64, 32, 32))
    # two branch blocks swap FP32 accumulators: 2 copies x 4 bytes per C element
    assert p.parts["dsm_exchange"] == chain.M * chain.N * 2 * 4


def test_placement_prefers_registers_then_smem_then_dsm_then_global():
    chain = Chain("t", "ffn", 64, 256, 32, 128)
    sched = parse_schedule("[M] L,N,K")            # C is held across the L loop
    cand = Candidates.single((1, 1, 2, 2), (16, 16, 32, 16))
    e, ea = 2, 4
    share = (256 // 16) * 16 * 16 * e               # n-tiles x blk_m x blk_n per block
    reg_work = 16 * 16 * ea + 16 * 16 * ea          # C and E accumulators
    big = Device()
    assert TIERS[analyze(chain, big, sched, "standard", cand).c_tier[0]] == "reg"
    import dataclasses
    no_reg = dataclasses.replace(big, reg_per_block=reg_work)
    assert TIERS[analyze(chain, no_reg, sched, "standard", cand).c_tier[0]] == "smem"
    a = analyze(chain, no_reg, sched, "standard", cand)
    tight = dataclasses.replace(no_reg, smem_per_block=int(a.smem_used[0]) + share // 2)  # half a copy fits
    assert TIERS[analyze(chain, tight, sched, "standard", cand).c_tier[0]] == "dsm"
    tiny = dataclasses.replace(no_reg, smem_per_block=int(a.smem_used[0]) + share // 4)
    a = analyze(chain, tiny, sched, "standard", cand)
    assert TIERS[a.c_tier[0]] == "global" and not a.rule5_ok[0]


def test_l2_rule_big_tensors_pay_temporal_rereads_in_dram():
    chain = Chain("t", "ffn", 64, 256, 128, 64)
    sched = parse_schedule("[M] N,L,K")
    cand = Candidates.single((1, 1, 1, 1), (16, 16, 16, 16))
    import dataclasses
    small_l2 = dataclasses.replace(Device(), l2_bytes=1000)
    big, small = analyze(chain, Device(), sched, "standard", cand), analyze(chain, small_l2, sched, "standard", cand)
    assert big.vol["global"][0] < small.vol["global"][0] <= small.vol["l2"][0]
    # A (64x128) is re-read once per N tile by the same cluster: 256/16 trips
    assert small.parts["l2_A"][0] == 64 * 128 * 2 * (256 // 16)


def test_analyze_rejects_schedules_outside_rules_3_and_4():
    chain = Chain("t", "ffn", 64, 64, 64, 64)
    with pytest.raises(ValueError):
        analyze(chain, Device(), parse_schedule("[L] M,N,K"), "standard", Candidates.single((1,) * 4, (16,) * 4))


def test_vectorized_rows_equal_single_row_analysis():
    chain = Chain("t", "gated", 48, 128, 64, 64)
    cand = candidates(chain, "sequential")
    idx = np.arange(0, len(cand), max(1, len(cand) // 25))
    for sched in legal_schedules():
        many = analyze(chain, Device(), sched, "sequential", cand)
        for i in idx:
            one = analyze(chain, Device(), sched, "sequential", Candidates.single(*cand.row(int(i))))
            for level in many.vol:
                assert many.vol[level][i] == one.vol[level][0]
