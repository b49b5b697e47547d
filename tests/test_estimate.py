"""The heuristic cost model against the simulator: rank correlation on an order sweep and a
granularity sweep, pruning that keeps the best schedule, and its speed."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

import fuseflow
from fuseflow.fusion.compile import compile_schedule
from fuseflow.fusion.estimate import CostModel
from fuseflow.ir.formats import TensorFormat
from fuseflow.ir.stats import DataStats
from fuseflow.studies.analysis import groups, pooled_spearman, prune_stats, summary_text
from fuseflow.studies.db import SweepDB
from fuseflow.studies.runner import SweepSpec, run_sweep

HERE = os.path.dirname(__file__)
MATMUL_CHAIN = os.path.join(HERE, "mlir", "matmul_chain.mlir")
GCN2 = os.path.join(HERE, "studies", "gcn2.mlir")
PRUNE = 1.5


@pytest.fixture(scope="module")
def sweep_rows(tmp_path_factory):
    """An order sweep (matmul chain, every valid order of each group, layout=induced) and a
    granularity sweep (a GCN-like network: unfused, per layer, full, random groupings)."""
    db = str(tmp_path_factory.mktemp("explore") / "sweep.db")
    run_sweep(SweepSpec([MATMUL_CHAIN], ["full layout=induced", "unfused layout=induced"], orders="all",
                        densities=[0.05], engine="oracle", db=db), progress=False)
    run_sweep(SweepSpec([GCN2], ["unfused", "fusion=[AX,H,R][AR,Y,O]", "full", "random:8"],
                        densities=[0.15], engine="oracle", db=db), progress=False)
    database = SweepDB(db)
    rows = database.rows()
    database.close()
    return rows


def by_program(rows, path):
    return [r for r in rows if r.program == os.path.normpath(path)]


@pytest.mark.slow
def test_sweeps_ran_and_verified(sweep_rows):
    chain, gcn = by_program(sweep_rows, MATMUL_CHAIN), by_program(sweep_rows, GCN2)
    assert len(chain) >= 20 and len(gcn) >= 8
    assert all(r.status == "ok" and r.verified == 1 for r in sweep_rows), \
        [(r.schedule, r.error) for r in sweep_rows if r.status != "ok"]
    assert len({r.schedule for r in chain}) == len(chain)
    assert all(r.bytes == 4 * (r.mem_reads + r.mem_writes) for r in sweep_rows)


@pytest.mark.slow
@pytest.mark.parametrize("path", [MATMUL_CHAIN, GCN2], ids=["orders", "granularity"])
def test_rank_correlation(sweep_rows, path):
    (group,) = groups(by_program(sweep_rows, path))
    assert group.spearman >= 0.8, summary_text(group.rows)


@pytest.mark.slow
def test_pooled_correlation(sweep_rows):
    assert pooled_spearman(sweep_rows) >= 0.8


@pytest.mark.slow
def test_estimates_track_flops_and_bytes(sweep_rows):
    """Flops and bytes (recomputation included) within 25% of the simulator on most schedules."""

    def close(a, b):
        return abs(a - b) <= 0.25 * b

    ok = [r for r in sweep_rows if close(r.est_flops, r.flops) and close(r.est_bytes, r.bytes)]
    assert len(ok) >= 0.8 * len(sweep_rows)


@pytest.mark.slow
def test_pruning_keeps_best_and_skips_half(sweep_rows):
    stats = prune_stats(sweep_rows, PRUNE)
    assert stats.groups == 2
    assert stats.kept_best == stats.groups
    assert stats.saved_share >= 0.5, summary_text(sweep_rows)


@pytest.mark.slow
def test_sweep_prunes_and_keeps_best(sweep_rows, tmp_path):
    """A real pruned sweep simulates only the survivors, and the best schedule is among them."""
    db = str(tmp_path / "pruned.db")
    summary = run_sweep(SweepSpec([MATMUL_CHAIN], ["full layout=induced", "unfused layout=induced"],
                                  orders="all", densities=[0.05], engine="oracle", db=db, prune=PRUNE),
                        progress=False)
    full = by_program(sweep_rows, MATMUL_CHAIN)
    assert summary.pruned + summary.simulated == len(full)
    assert summary.pruned >= len(full) / 2
    rows = SweepDB(db).rows()
    best = min(full, key=lambda r: r.cycles)
    simulated = {r.schedule: r.cycles for r in rows if r.status == "ok"}
    assert simulated.get(best.schedule) == best.cycles
    assert all(r.est_cycles is not None for r in rows)


@pytest.mark.slow
def test_estimate_is_fast(sweep_rows):
    times = [r.est_seconds for r in sweep_rows]
    assert max(times) < 0.5 and sum(times) / len(times) < 0.05


def test_recomputation_is_charged():
    """T = A*B nested inside O's loop over j is recomputed for every j."""
    p = fuseflow.from_mlir(MATMUL_CHAIN)
    data = fuseflow.random_inputs(p, density=0.3, seed=0)
    model = CostModel(p, data)
    good = model.estimate(compile_schedule(p, "full layout=induced order=i,l,k,j", model.shapes))
    bad = model.estimate(compile_schedule(p, "full layout=induced order=i,j,l,k", model.shapes))
    (kernel,) = bad.kernels
    assert bad.flops == pytest.approx(93000, rel=0.05)  # the simulator counts 93000
    assert good.flops == pytest.approx(6600, rel=0.05)
    assert bad.cycles > 5 * good.cycles and kernel.bottleneck_node


def test_level_densities_follow_storage():
    A = np.zeros((4, 6))
    A[0, :3] = 1
    A[2, 5] = 1
    s = DataStats({"A": A})
    assert s.level_densities("A", TensorFormat.parse("dense,compressed")) == [1.0, pytest.approx(4 / 24)]
    assert s.level_densities("A", TensorFormat.parse("compressed,compressed")) == [0.5, pytest.approx(4 / 12)]
    col = s.level_densities("A", TensorFormat.parse("compressed,dense;order=1,0"))
    assert col == [pytest.approx(4 / 6), 1.0]
    assert math.isclose(s.density("A"), 4 / 24)


def test_estimate_of_every_test_program_runs():
    """The heuristic never fails on a schedule that compiles (it must not stop a sweep)."""
    import glob

    for path in sorted(glob.glob(os.path.join(HERE, "mlir", "*.mlir"))):
        p = fuseflow.from_mlir(path)
        shapes = {n: tuple(6 if d is None else d for d in p.tensors[n].shape) for n in p.inputs}
        data = fuseflow.random_inputs(p, density=0.2, seed=1, shapes=shapes)
        model = CostModel(p, data)
        for schedule in ("unfused", "full", "full layout=induced"):
            try:
                compiled = compile_schedule(p, schedule, model.shapes)
            except fuseflow.FuseflowError:
                continue
            est = model.estimate(compiled)
            assert est.cycles > 0 and est.flops >= 0 and est.bytes > 0, (path, schedule)
