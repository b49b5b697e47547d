"""The one result row (`studies.row.ResultRow`): database round trip, rows of older schemas,
what a study's JSON keeps, and the planned row a sweep completes."""
from __future__ import annotations

from dataclasses import replace

from fuseflow.studies.db import NAMES, SweepDB
from fuseflow.studies.row import ESTIMATED_KEYS, FAILED_KEYS, RATIO_KEYS, SIMULATED_KEYS, ResultRow, merged
from fuseflow.studies.suite.run import study_rows

SAMPLED = ResultRow("partial", program="model:gcn", data="dataset=karate", seed=0, label="partial", model="gcn",
                    dataset="karate", suite="s", schedule_text="fusion=[t2,t5]", kernels=2, cycles=50, flops=7,
                    mem_reads=3, mem_writes=1, max_occupancy=4, verified=True, wall_seconds=1.5, est_cycles=40.0,
                    est_mem=6.0, mode="sampled", method="stratified regression", cycles_low=45, cycles_high=55,
                    sampled_fraction=0.05)


def test_a_row_comes_back_from_the_database_as_it_went_in():
    db = SweepDB(":memory:")
    assert db.insert(SAMPLED)
    back = db.rows()[0]
    assert replace(back, id=None, created=None, est_bytes=None) == SAMPLED
    assert back.est_bytes == 24.0 and back.bytes == 16 and back.mem == 4
    assert set(SAMPLED.to_db()) <= set(NAMES) and "speedup" not in SAMPLED.to_db()


def test_a_row_of_an_older_schema_reads_its_missing_columns_as_none():
    old = {"id": 1, "program": "p.mlir", "schedule": "full", "data": "density=0.1", "seed": 0, "status": "ok",
           "cycles": 7, "verified": None, "bytes": 28}
    row = ResultRow.from_db(old)
    assert (row.cycles, row.mode, row.suite, row.verified, row.reason) == (7, None, None, False, None)


def test_a_studys_json_keeps_each_kinds_keys_in_order():
    ok = replace(SAMPLED, speedup=2.0, flops_ratio=1.0, mem_ratio=0.5)
    assert list(ok.study_json()) == [*SIMULATED_KEYS, *RATIO_KEYS]
    estimated = ResultRow("full", "estimated", reason="too long", est_cycles=9.0, estimated_ratios=True)
    assert list(estimated.study_json()) == [*ESTIMATED_KEYS, *RATIO_KEYS, "estimated_ratios"]
    assert estimated.study_json()["verified"] == "skipped" and estimated.study_json()["skipped"] == "too long"
    failed = ResultRow("x", "error", error="boom")
    assert list(failed.study_json()) == [*FAILED_KEYS, *RATIO_KEYS] and failed.study_json()["verified"] == "failed"
    whole = replace(ok, mode="whole", model_cycles=500)
    assert list(whole.study_json())[len(SIMULATED_KEYS)] == "model_cycles"


def test_a_suites_rows_take_ratios_and_intervals_over_their_baseline():
    unfused = replace(SAMPLED, schedule="unfused", label="unfused", cycles=100, mode="whole", cycles_low=None,
                      cycles_high=None)
    rows = study_rows([unfused, SAMPLED])
    assert [r.schedule for r in rows] == ["unfused", "partial"]
    assert rows[1].speedup == 2.0 and round(rows[1].speedup_low, 2) == 1.82 and round(rows[1].speedup_high, 2) == 2.22


def test_a_sweeps_planned_row_is_completed_by_its_simulation():
    planned = ResultRow("full", program="p.mlir", data="density=0.1", seed=0, label="full", kernels=3,
                        est_cycles=90.0)
    failed = merged(planned, ResultRow("full", "error", program="p.mlir", error="boom", wall_seconds=0.1))
    assert (failed.status, failed.label, failed.kernels, failed.est_cycles, failed.error) == \
        ("error", "full", 3, 90.0, "boom")
