"""The functional checker executes plans in numpy; its results and byte counts must equal the
unfused computation and the analyzer's prediction."""
import dataclasses
import random

import numpy as np
import pytest

from fuseflow.gpu.emulation.plan_emulator import CheckError, reference, run_plan
from fuseflow.gpu.planning.planner import make_plan, plan_chain
from fuseflow.gpu.planning.search_space import candidates, legal_schedules
from fuseflow.gpu.planning.traffic import TIERS, analyze
from fuseflow.gpu.problem.chains import Chain
from fuseflow.gpu.problem.device import Device

CHAINS = [
    Chain("ffn-gelu", "ffn", 40, 128, 64, 64, act="gelu"),   # M=40 pads to 48: masked rows
    Chain("gated", "gated", 48, 64, 64, 64),                  # both gated strategies
    Chain("ffn-silu", "ffn", 64, 64, 32, 128, act="silu"),
    Chain("conv", "conv", 20, 64, 48, 32),                    # a lowered conv chain with ragged M
]
# a small device so that on these shapes caches spill to SMEM, DSM and global, and the L2 rule bites
SMALL = dataclasses.replace(Device(), reg_per_block=4096, smem_per_block=24 * 1024, l2_bytes=20000)
DEVICES = [Device(), SMALL]


def _assert_agree(chain, plan, device):
    run = run_plan(chain, plan, device)
    assert run.max_error < 1e-9 * max(1.0, float(np.abs(run.reference).max()))
    assert run.volumes == plan.volumes
    assert run.parts == plan.parts


def _random_plans(seed, count):
    rng = random.Random(seed)
    for _ in range(count):
        chain, device = rng.choice(CHAINS), rng.choice(DEVICES)
        strategy = rng.choice(chain.strategies)
        cand = candidates(chain, strategy)
        cls, blk = cand.row(rng.randrange(len(cand)))
        yield chain, device, make_plan(chain, device, rng.choice(legal_schedules()), strategy, cls, blk)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_random_plans_agree_with_analyzer(seed):
    for chain, device, plan in _random_plans(seed, 75):
        _assert_agree(chain, plan, device)


def _plans_by_tier():
    """For each reachable (C tier, E tier) pair, the first plan found that uses it."""
    found = {}
    devices = [dataclasses.replace(Device(), reg_per_block=r, smem_per_block=s, l2_bytes=20000)
               for s in (8 * 1024, 16 * 1024, 40 * 1024) for r in (2048, 8192)]
    for chain in CHAINS[:1] + [Chain("wide", "ffn", 64, 256, 32, 128)]:
        cand = candidates(chain, "standard")
        for sched in legal_schedules():
            for device in devices:
                a = analyze(chain, device, sched, "standard", cand)
                for i in np.flatnonzero(a.working_ok):
                    key = (TIERS[a.c_tier[i]], TIERS[a.e_tier[i]])
                    if key not in found:
                        found[key] = (chain, device, make_plan(chain, device, sched, "standard", *cand.row(int(i))))
    return found


def test_every_placement_tier_is_checked():
    found = _plans_by_tier()
    # C is held across L only in schedules where E is not held across N, and vice versa
    tiers = ("reg", "smem", "dsm", "global")
    expected = {("-", "-")} | {(t, "-") for t in tiers} | {("-", t) for t in tiers}
    assert set(found) == expected
    for chain, device, plan in found.values():
        _assert_agree(chain, plan, device)


def test_checker_refuses_a_plan_without_room_for_a_held_tensor():
    chain = Chain("t", "ffn", 32, 64, 32, 64)
    plan = make_plan(chain, Device(), next(s for s in legal_schedules() if s.name == "[M] L,N,K"),
                     "standard", (1, 1, 1, 1), (16, 16, 16, 16))
    assert plan.placement["C"] != "-"
    broken = dataclasses.replace(plan, placement={"C": "-", "E_acc": "-"})
    with pytest.raises(CheckError):
        run_plan(chain, broken)


def test_best_plans_of_small_chains_check():
    for chain in CHAINS:
        for plan in plan_chain(chain, topk=3).plans:
            _assert_agree(chain, plan, Device())


def test_reference_gated_is_silu_gate_times_up():
    rng = np.random.default_rng(0)
    A, B0, B1, D = (rng.standard_normal(s) for s in ((4, 3), (3, 5), (3, 5), (5, 2)))
    g = A @ B0
    expected = (g / (1 + np.exp(-g)) * (A @ B1)) @ D
    assert np.allclose(reference(Chain("g", "gated", 4, 5, 3, 2), A, [B0, B1], D), expected)
