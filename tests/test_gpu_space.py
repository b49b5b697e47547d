"""Search-space counts: the paper's test vectors and the pruning rules."""
import itertools
import math

import pytest

from fuseflow.gpu.planning.loop_schedules import all_schedules, rule3_ok, rule4_ok
from fuseflow.gpu.planning.search_space import (
    CLUSTER_SIZES,
    candidates,
    cluster_ok,
    count_rules_1_to_4,
    derived,
    legal_schedules,
    rule2_size_only,
    tile_choices,
)
from fuseflow.gpu.problem.benchmarks import BENCHMARKS, GPT67B_EXAMPLE
from fuseflow.gpu.problem.chains import Chain


def test_41_schedules_are_distinct_and_cover_every_spatial_set():
    schedules = all_schedules()
    # C(4,1)*3! + C(4,2)*2! + C(4,3)*1! + C(4,4)*0! = 24 + 12 + 4 + 1
    assert len(schedules) == 24 + 12 + 4 + 1 == 41
    assert len(set(schedules)) == len(schedules)
    for s in schedules:
        assert sorted(s.spatial | set(s.temporal)) == ["K", "L", "M", "N"]


def test_gpt67b_original_space_is_2_7515e13():
    g = GPT67B_EXAMPLE  # M=256, N=16384, K=L=4096 (paper Table III)
    # 41 schedules x 5^4 cluster shapes x every multiple of 16 up to each extent
    expected = 41 * 5**4 * (256 // 16) * (16384 // 16) * (4096 // 16) * (4096 // 16)
    counts = count_rules_1_to_4(g)
    assert counts["original"] == expected
    assert f"{counts['original']:.4e}" == "2.7515e+13"


def test_gpt67b_after_rule1_is_1_1416e8():
    g = GPT67B_EXAMPLE
    # power-of-two multiples of 16 dividing each extent: 16..256 (5), 16..16384 (11), 16..4096 (9, 9)
    per_dim = [len(tile_choices(p)) for p in g.padded]
    assert per_dim == [5, 11, 9, 9]
    counts = count_rules_1_to_4(g)
    assert counts["rule1"] == 41 * 625 * 5 * 11 * 9 * 9
    assert f"{counts['rule1']:.4e}" == "1.1416e+08"


def test_counts_shrink_rule_by_rule_and_rules_3_4_keep_10_then_5_schedules():
    counts = count_rules_1_to_4(BENCHMARKS["G4"])
    values = list(counts.values())
    assert values == sorted(values, reverse=True)
    # Rules 3 and 4 only drop schedules: of 41, 10 keep K temporal and innermost, 5 also keep L off the grid
    assert counts["rule3"] * 41 == counts["rule2"] * 10
    assert counts["rule4"] * 10 == counts["rule3"] * 5
    assert len(legal_schedules()) == 5
    assert all(rule3_ok(s) and rule4_ok(s) for s in legal_schedules())


def test_fig7_derived_variables():
    # cls_shuffle = cls_l / cls_k ; cls_reduce = cls_n * cls_k / cls_l
    assert derived(2, 4, 2, 4) == (4 // 2, 4 * 2 // 4) == (2, 2)
    assert derived(2, 4, 2, 8) == (8 // 2, 4 * 2 // 8) == (4, 1)


def test_rule2_size_only_interpretation_keeps_175_of_625():
    brute = sum(cm * cn * ck <= 16 for cm, cn, ck, _ in itertools.product(CLUSTER_SIZES, repeat=4))
    assert rule2_size_only() == brute == 175


def test_rule2_blocks_agree_in_both_gemm_views():
    for cm, cn, ck, cl in itertools.product(CLUSTER_SIZES, repeat=4):
        if cluster_ok(cm, cn, ck, cl, "standard"):
            sh, cr = derived(cm, cn, ck, cl)
            assert sh * cr == cn and ck * sh == cl
            assert cm * cn * ck == cm * cl * cr <= 16
    assert not cluster_ok(1, 2, 2, 1, "standard")      # cls_l < cls_k: no whole shuffle group
    assert not cluster_ok(1, 2, 1, 4, "standard")      # cls_shuffle 4 does not divide cls_n 2
    assert not cluster_ok(1, 1, 4, 4, "spatial")       # gated spatial uses exactly 2 branch groups


def test_non_power_of_two_extents_use_every_dividing_multiple_of_16():
    assert tile_choices(416) == [16, 32, 208, 416]     # 416 = 16 * 26 = 16 * 2 * 13
    chain = Chain("odd", "ffn", 49, 64, 32, 32)         # M = 49 pads to 64
    assert chain.padded[0] == 64
    rows = candidates(chain, "standard")
    assert set(rows.bm.tolist()) == set(tile_choices(64))
    # every cluster tile divides the padded extent (Rule 2, tile part)
    assert all((64 % (cm * bm) == 0) for cm, bm in zip(rows.cm.tolist(), rows.bm.tolist()))


def test_gated_chains_count_both_strategies():
    chain = BENCHMARKS["S8"]
    both = count_rules_1_to_4(chain)
    seq = count_rules_1_to_4(chain, strategies=("sequential",))
    spa = count_rules_1_to_4(chain, strategies=("spatial",))
    assert both == {k: seq[k] + spa[k] for k in both}
    assert spa["rule2"] < seq["rule2"]                 # spatial fixes cls_k = 2


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_every_benchmark_has_legal_candidates(name):
    chain = BENCHMARKS[name]
    for strategy in chain.strategies:
        assert len(candidates(chain, strategy)) > 0
    assert math.prod(len(tile_choices(p)) for p in chain.padded) > 0
