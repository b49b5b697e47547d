"""A window of a kernel whose outer loop is a reduction, checked on its own (`partition.partials`)."""
from __future__ import annotations

import numpy as np
import pytest

import fuseflow
from fuseflow.partition.partials import partial_sums
from fuseflow.partition.run import simulate_partitioned
from fuseflow.partition.sampled import SamplePlan
from fuseflow.partition.windows import kernel_setup, reference_values, run_window_of, window_problem
from fuseflow.pipeline import VerificationError, prepared
from fuseflow.sim.window import Window


def _reducing(name: str):
    """A test program's first kernel, whose outer loop is a reduction, with its check."""
    program = fuseflow.from_mlir(f"tests/mlir/{name}.mlir")
    data, compiled = prepared(program, "full", None, 2, 0.3)
    values = reference_values(program, data)
    kernel = compiled.kernels[0]
    setup = kernel_setup(kernel, values)
    assert setup.reduces
    return program, data, compiled, values, kernel, setup


@pytest.mark.parametrize("name, window", [("sddmm", Window(((2, 5),))), ("sddmm", Window(((0, 1), (6, 8)))),
                                          ("spmm_jik", Window(((3, 9),)))])
def test_a_windows_partial_sums_equal_the_kernel_on_its_cut_inputs(name, window):
    """sddmm (k outermost: O is a sum over k) and spmm_jik (its accumulator reorders Y, written
    by columns of the window): a window's outputs are the kernel on the inputs cut to it."""
    *_, values, kernel, setup = _reducing(name)
    check = partial_sums(kernel, values)
    run = run_window_of(setup, window, None, "fast")
    got = dict(run.outputs)
    assert check.problem(kernel.index, run.outputs, window) is None
    assert not run.outputs  # checked outputs are not kept
    total = next(iter(check.expected(Window(((0, setup.extent),))).values()))
    out = next(iter(values[t] for t, _, _ in check.outputs.values()))
    assert np.allclose(total, out)  # the whole window is the reference's output
    part = next(iter(got.values()))
    wrong = part.toarray() if hasattr(part, "toarray") else np.array(part)
    wrong[np.unravel_index(np.argmax(np.abs(wrong)), wrong.shape)] += 1.0  # a wrong partial sum
    problem = check.problem(kernel.index, {n: wrong for n in got}, window)
    assert "partial sum" in problem and "differs" in problem


def test_a_sampled_reducing_kernel_is_verified_window_by_window():
    """Sampled, a reducing kernel is sampled (not run whole), each window's partial sums checked
    as it runs (not kept), and the run is verified; a wrong window is reported."""
    program, data, compiled, *_ = _reducing("sddmm")
    plan = SamplePlan(fraction=0.5, seed=1, min_width=1, whole_below=0)
    r = simulate_partitioned(program, compiled, data, sample=plan)
    assert r.mode == "sampled" and r.verified and r.cycles_low <= r.cycles <= r.cycles_high
    unchecked = simulate_partitioned(program, compiled, data, sample=plan, check=False)
    assert unchecked.mode == "sampled" and not unchecked.verified


def test_a_wrong_partial_sum_fails_the_run(monkeypatch):
    import fuseflow.partition.windows as windows

    real = windows._window_output

    def off_by_one(written, meta):
        value = real(written, meta)
        return (value.toarray() if hasattr(value, "toarray") else np.array(value)) + 1.0

    monkeypatch.setattr(windows, "_window_output", off_by_one)
    program, data, compiled, values, kernel, setup = _reducing("sddmm")
    setup.partials = partial_sums(kernel, values)
    run = run_window_of(setup, Window(((2, 5),)), None, "fast")
    assert "partial sum" in window_problem(setup, run, values)
    with pytest.raises(VerificationError, match="partial sum"):
        simulate_partitioned(program, compiled, data, sample=SamplePlan(fraction=0.5, min_width=1, whole_below=0))
