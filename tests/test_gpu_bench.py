"""The full benchmark: all 26 chains planned, baselines, summary and run time."""
import time

import pytest

from fuseflow.gpu.planning.predicted_bench import PAPER_SET, format_summary, format_table, run_bench, summarize
from fuseflow.gpu.problem.benchmarks import BENCHMARKS

BENCH_LIMIT_S = 300  # the bound for `fuseflow gpu bench`


@pytest.mark.slow
def test_all_26_chains_plan_and_beat_unfused():
    start = time.perf_counter()
    rows = run_bench()
    elapsed = time.perf_counter() - start
    assert elapsed < BENCH_LIMIT_S
    assert [r.chain.name for r in rows] == list(BENCHMARKS)
    for r in rows:
        # the fused plan never moves more DRAM bytes than the unfused kernels, and is predicted faster
        assert r.plan.volumes["global"] <= r.unfused.volumes["global"]
        assert r.plan.cost < r.unfused.cost
        # fusion removes the C round trip: at least that many L2 request bytes are saved
        c_bytes = r.chain.M * r.chain.N * 2
        assert r.unfused.volumes["l2"] - r.plan.volumes["l2"] >= 2 * c_bytes
    summary = summarize(rows)
    assert summary["paper_set"]["chains"] == len(PAPER_SET) == 18
    assert summary["all"]["chains"] == 26
    # in kind: fusion reduces global traffic on average; L2 request traffic shows the larger effect
    assert summary["paper_set"]["global_ratio_mean"] > 1
    assert summary["paper_set"]["l2_ratio_mean"] > summary["paper_set"]["global_ratio_mean"]
    table = format_table(rows)
    assert table.count("\n") == 26 + 1          # header, rule line, 26 rows
    assert "2.4x" in format_summary(summary)
