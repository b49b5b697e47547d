"""Progress and noise: a live display from the first moment on a terminal only, progress in
token events, a notice while numba compiles, and library warnings and log lines kept out of
command output (back with --debug)."""
from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuseflow.models.registry import build
from fuseflow.progress import RunProgress, SuiteProgress, TaskProgress, numba_notice
from fuseflow.studies.granularity import fusion_study
from fuseflow.studies.row import ResultRow


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.slow
def test_a_run_shows_its_elapsed_time_before_any_kernel_ends():
    out = Terminal()
    with RunProgress("gcn full", out=out):
        time.sleep(1.3)  # a first kernel that takes a while: the ticker redraws meanwhile
        drawn = out.getvalue()
    assert "gcn full: [00:01" in drawn  # the elapsed counter advanced with no kernel finished


def test_nothing_is_drawn_outside_a_terminal():
    out = io.StringIO()
    with RunProgress("gcn full", estimated_events=[10.0], out=out) as run:
        run.on_kernel(1, 1)
        run.on_events(5, 10)
    with TaskProgress(3, out=out) as bar:
        bar.update()
    assert out.getvalue() == ""


def test_estimates_weigh_kernels_and_events_move_within_one():
    out = Terminal()
    with RunProgress("sae", estimated_events=[900.0, 100.0], out=out) as run:
        run.on_events(450)  # halfway through the first kernel's estimate
        assert (run.bar.n, run.bar.total) == (450.0, 1000.0)
        run.on_kernel(1, 2)
        assert (run.bar.n, run.bar.total) == (900.0, 1000.0)
        run.on_events(300)  # the engine's count passed the second kernel's estimate: the total follows
        assert (run.bar.n, run.bar.total) == (1200.0, 1200.0)
        run.on_events(50, 400)  # or the count of an estimate given with it
        assert (run.bar.n, run.bar.total) == (950.0, 1300.0)
    assert "token events" in out.getvalue()


def test_without_estimates_the_bar_counts_kernels():
    out = Terminal()
    with RunProgress("spmv", out=out) as run:
        run.on_kernel(2, 3)
        assert (run.bar.n, run.bar.total) == (2, 3)
    assert "kernel 2/3" in out.getvalue()


def test_a_sweep_bar_counts_failures():
    out = Terminal()
    with TaskProgress(4, out=out) as bar:
        bar.update(note="full")
        bar.update(note="unfused", error=True)
    assert "2/4" in out.getvalue() and "1 failed" in out.getvalue()


def test_a_study_draws_one_bar_per_schedule():
    out = Terminal()
    fusion_study(build("gcn", "karate"), ["unfused", "partial"], progress=True, out=out)
    text = out.getvalue()
    assert "gcn unfused" in text and "gcn partial" in text and "kernel 2/2" in text and "kernel 8/8" in text


def test_a_suites_task_bars_stay_together_and_end_with_their_tasks():
    out = Terminal()
    with SuiteProgress("s", total=3, out=out) as p:
        for task in ("a", "b"):
            p.event({"task": task, "done": 0.0, "total": None, "note": "building and estimating"})
        assert p.running["b"].format_dict["postfix"] == "building and estimating"
        p.event({"task": "a", "end": True})  # its worker is done: the bar goes before the row comes
        assert list(p.running) == ["b"] and abs(p.running["b"].pos) == 1  # b moved up to a's line
        p.event({"task": "a", "done": 5.0, "total": 10.0})  # a late message of a's does not bring it back
        p.finished("a", ResultRow("a", cycles=1))
        p.event({"task": "c", "done": 0.0, "total": None})
        assert {t: abs(bar.pos) for t, bar in p.running.items()} == {"b": 1, "c": 2}
        assert "2 running" in str(p.bar)


def test_a_suites_task_bar_counts_past_its_estimate():
    out = Terminal()
    with SuiteProgress("s", total=1, out=out) as p:
        p.event({"task": "a", "done": 0.0, "total": None})
        assert p.running["a"].total is None and "token events" not in str(p.running["a"])
        p.event({"task": "a", "done": 50.0, "total": 200.0})
        assert "25%" in str(p.running["a"]) and "50/200 token events" in str(p.running["a"])
        p.event({"task": "a", "done": 300.0, "total": 200.0, "note": "verifying"})
        assert "a: 300 token events, past the estimate [00:00, verifying]" in str(p.running["a"])


def test_numba_compilation_is_announced_once(monkeypatch):
    import numba

    import fuseflow.progress as progress

    monkeypatch.setattr(progress, "_NOTICE_GIVEN", progress.threading.Event())  # as in a fresh process
    out = io.StringIO()
    with numba_notice(out):
        numba.njit(lambda x: x + 1)(1)  # a fresh function: numba compiles it
        numba.njit(lambda x: x * 2)(1)
    assert out.getvalue().count("compiling the simulator's kernels with numba") == 1
    with numba_notice(out):  # a second simulation in the same process: no second notice
        numba.njit(lambda x: x * 3)(1)
    numba.njit(lambda x: x - 1)(1)  # outside the context: nothing printed
    assert out.getvalue().count("\n") == 1


@pytest.fixture(scope="module")
def net() -> str:
    return str(Path(__file__).parent / "torch_models.py")


def fuseflow(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fuseflow", *argv], capture_output=True, text=True)


@pytest.mark.slow
def test_torch_warnings_stay_out_of_command_output(net):
    done = fuseflow("inspect", "--torch", f"{net}:LinearRelu", "--input", "5x5:csr", "--input", "5x4")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    loud = fuseflow("--debug", "inspect", "--torch", f"{net}:LinearRelu", "--input", "5x5:csr", "--input", "5x4")
    assert loud.returncode == 0 and "Sparse CSR tensor support is in beta" in loud.stderr


@pytest.mark.slow
def test_torch_tracebacks_stay_out_of_a_shape_error(net):
    done = fuseflow("inspect", "--torch", f"{net}:LinearRelu", "--input", "5x5:csr", "--input", "5x7")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("fuseflow: error: ") and done.stderr.count("\n") == 1, done.stderr
