"""The streaming engine in bounded memory: its peak stays flat as streams grow, and a run that
cannot fit stops with the memory guard's one-line message (or, in a study, becomes an estimate)."""
from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import fuseflow
from fuseflow.execute import decode
from fuseflow.fusion.compile import compile_schedule
from fuseflow.ir.formats import TensorFormat
from fuseflow.memory import Budget, MemoryLimitError, release_freed, resident_bytes
from fuseflow.pipeline import simulate
from fuseflow.sim import fast
from fuseflow.sim.fast import pool
from fuseflow.sim.fast.engine import WHOLE
from fuseflow.sim.storage import StoredTensor
from fuseflow.studies.granularity import fusion_study

COLUMN_SUMS = """
#CSR = #sparse_tensor.encoding<{{ map = (i, j) -> (i : dense, j : compressed) }}>
#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (j)>
func.func @colsum(%A: tensor<{n}x64xf32, #CSR>) -> tensor<64xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %y = linalg.generic {{indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}}
      ins(%A : tensor<{n}x64xf32, #CSR>) outs(%i : tensor<64xf32>) {{
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }} -> tensor<64xf32>
  return %y : tensor<64xf32>
}}
"""


def _peak_of_run(rows: int, chunk, schedule: str = "full layout=induced order=j,i") -> tuple[int, int]:
    """(peak bytes traced while the engine ran, token events) for column sums of a rows x 64
    matrix at 20%: the streams grow with the rows, the output does not."""
    program = fuseflow.from_mlir(COLUMN_SUMS.format(n=rows))
    (kernel,) = compile_schedule(program, schedule).kernels
    A = sp.random(rows, 64, density=0.2, format="csr", random_state=np.random.default_rng(0))
    stored = {name: StoredTensor.from_value(A, TensorFormat.of(meta)) for name, meta in kernel.graph.tensors.items()
              if meta.role == "input"}
    fast.run_graph(kernel.graph, stored, chunk=chunk)  # warm: numba kernels loaded
    pool.clear()  # the run's buffers are counted, not the warm run's reused
    tracemalloc.start()
    run = fast.run_graph(kernel.graph, stored, chunk=chunk)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    y = program.outputs[0]
    assert np.allclose(decode(run.written[y], kernel.graph.tensors[y]), A.sum(axis=0))
    return peak, sum(run.stream_tokens.values())


def test_peak_memory_stays_flat_while_the_streams_grow_tenfold():
    """Column by column (each column's rows reduced as they stream by), ten times the rows."""
    small, events_small = _peak_of_run(4_000, 1024)
    large, events_large = _peak_of_run(40_000, 1024)
    assert events_large > 9 * events_small
    assert large < small * 1.25 + (1 << 20), f"{small / 1e6:.1f} MB -> {large / 1e6:.1f} MB"
    # the same runs with streams kept whole grow with them: the measurement can tell
    whole_small, _ = _peak_of_run(4_000, WHOLE)
    whole_large, _ = _peak_of_run(40_000, WHOLE)
    assert whole_large > 5 * whole_small


def test_what_grows_is_what_the_modelled_fifo_holds_at_a_few_bytes_a_token():
    """Row by row into an accumulator: the unbounded-FIFO model lets the row scan run ahead of
    the accumulator, so one modelled FIFO holds nearly every row coordinate at its fullest, and
    its exact occupancy needs their consume times: a few bytes per row, nothing per entry."""
    order = "full order=i,j"
    small, _ = _peak_of_run(4_000, 1024, order)
    large, events = _peak_of_run(40_000, 1024, order)
    assert large - small < 16 * 36_000, f"{small / 1e6:.2f} MB -> {large / 1e6:.2f} MB"
    assert large - small < events / 4  # whole streams would take about 25 bytes per token event


def test_a_kernel_beyond_the_memory_limit_stops_with_one_line_naming_it():
    program = fuseflow.from_mlir(COLUMN_SUMS.format(n=5000))
    gc.collect()  # garbage of earlier tests freed later would raise the room the limit leaves
    pool.clear()  # and so would the engine's pooled buffers, which a failing check frees
    release_freed()
    tight = Budget(resident_bytes() + (1 << 20))  # one megabyte above what the process holds now
    with pytest.raises(MemoryLimitError) as info:
        simulate(program, "full", seed=1, density=0.2, budget=tight)
    message = info.value.one_line()
    assert "kernel k0" in message and "needs about" in message and "\n" not in message
    assert simulate(program, "full", seed=1, density=0.2, budget=Budget("64G")).verified


class _FirstKernels(Budget):
    """Room for the first `n` kernels (their estimate before they run), none after."""

    def __init__(self, n: int):
        super().__init__()
        self.left = n

    def check(self, nbytes: float, what: str) -> None:
        if what.startswith("kernel k"):
            self.left -= 1
            if self.left < 0:
                Budget("1").check(nbytes, what)


def test_a_study_records_the_estimate_of_a_schedule_that_does_not_fit():
    from fuseflow.models.registry import build

    case = build("gcn", dataset="karate")
    unfused = compile_schedule(case.program, case.presets["unfused"])
    checks = sum(1 for k in unfused.kernels if not k.is_reshape)  # one estimate per kernel
    rows = fusion_study(case, ["unfused", "partial"], budget=_FirstKernels(checks))
    assert rows[0].verified is True
    assert rows[1].verdict == "skipped" and "would not fit in memory" in rows[1].reason
    assert "kernel k0" in rows[1].reason and rows[1].est_cycles > 0 and rows[1].speedup > 0
    with pytest.raises(MemoryLimitError):  # the baseline itself must fit: nothing to compare with
        fusion_study(case, ["unfused"], budget=_FirstKernels(0))


def test_a_sampled_schedule_that_does_not_fit_is_estimated_not_failed():
    from fuseflow.fusion.estimate import CostModel
    from fuseflow.models.registry import build
    from fuseflow.studies.granularity import study_schedule

    case = build("gcn", dataset="karate")
    model = CostModel(case.program, case.inputs)
    # a budget too small for anything: sampled (max_tokens far below the schedule's events)
    row = study_schedule(case, "unfused", model, max_tokens=1e4, budget=Budget("1"))
    assert row.verdict == "skipped" and "would not fit in memory" in row.reason, row
    with pytest.raises(MemoryLimitError):  # the baseline of a study must fit
        study_schedule(case, "unfused", model, max_tokens=1e4, budget=Budget("1"), first=True)


def test_a_memory_check_that_would_fail_empties_the_engine_buffer_pool_first():
    pool.clear()
    kept = pool.take(8 << 20, np.float64)  # 64 MB, touched: resident
    kept.fill(1.0)
    pool.give(kept)
    del kept
    assert pool.pooled_bytes() == 64 << 20
    budget = Budget(resident_bytes() + (32 << 20))
    budget.check(48 << 20, "a kernel")  # fits only once the pool's 64 MB are freed
    assert pool.pooled_bytes() == 0
    with pytest.raises(MemoryLimitError):
        budget.check(1 << 30, "a kernel")

