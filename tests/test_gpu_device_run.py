"""The staged GPU run without a GPU: the watchdog (a child that hangs past its job's time limit, one that
crashes, one that reports a CUDA fault, one that succeeds), the append-only result lines and the summary of
a partial file, the smoke gate, the rerun of only what failed with its reproducers, and the scripts' syntax.

The children here are a stand-in program written by the tests (selected with FUSEFLOW_GPU_CHILD); every
timing they report is made-up test data."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuseflow.gpu.kernels.nvcc import find_nvcc
from fuseflow.gpu.measuring import device_run
from fuseflow.gpu.measuring.device_run import DeviceRunOptions, StageLimits, run_device
from fuseflow.gpu.measuring.kernel_jobs import KernelJob, planned_kernels, smoke_picks
from fuseflow.gpu.measuring.result_log import Record, append, final_results, read_records
from fuseflow.gpu.measuring.result_summary import summarize_run
from fuseflow.gpu.measuring.watchdog import CHILD_HOOK, run_jobs
from fuseflow.gpu.problem.benchmarks import BENCHMARKS

ROOT = Path(__file__).resolve().parents[1]

FAKE_CHILD = r'''
"""Stand-in for fuseflow.gpu.measuring.kernel_child: behaviour per job key from $FAKE_BEHAVIOUR (test data)."""
import json, os, sys, time
from fuseflow.gpu.measuring.kernel_jobs import read_jobs
from fuseflow.gpu.measuring.result_log import Record, append

jobs, results, first = read_jobs(sys.argv[1]), sys.argv[2], int(sys.argv[3])
behaviour = json.loads(os.environ.get("FAKE_BEHAVIOUR", "{}"))
timing = {"median_us": 10.0, "min_us": 9.0, "p10_us": 9.5, "p90_us": 11.0, "runs": 20, "warmup": 5,
          "samples_us": [10.0] * 20}
for job in jobs[first:]:
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(job.key + "\n")
    append(results, Record("start", job.key, job.stage, job.chain, job.rank, job.path, launch=job.launch))
    what = behaviour.get(job.key, behaviour.get(job.stage + ":*", "ok"))
    if what == "hang":
        time.sleep(600)
    if what == "crash":                      # dies without a word, as a segfaulting process would
        sys.stderr.write("Segmentation fault (core dumped)\n")
        sys.stderr.flush()
        os._exit(139)
    if what == "fault":
        append(results, Record("done", job.key, job.stage, job.chain, job.rank, job.path, "fault",
                               "launch failed with CUDA error 700", launch=job.launch))
        sys.exit(3)
    if job.stage == "env":
        data = {"name": "TEST H200 (made-up data)", "sms": 132, "l2_bytes": 60000000, "copy_bandwidth": 4.3e12,
                "torch_version": "test", "nvcc_version": "test"}
    elif job.stage == "measure":
        data = {"chain": job.chain, "rank": job.rank, "plan": "fake", "predicted_us": 8.0 * job.rank,
                "timing": dict(timing, median_us=10.0 * job.rank), "max_error": 1e-3, "within_tolerance": True,
                "volumes": {"l2": 1e6, "dsm": 1e5}, "cluster_size": 2, "occupancy": 1.0, "error": "",
                "phase_share": {}}
    elif job.stage in ("eager", "compile"):
        data = timing
    else:
        data = {"max_error": 1e-3}
    append(results, Record("done", job.key, job.stage, job.chain, job.rank, job.path, "ok", "", 0.01, job.launch,
                           data))
'''


@pytest.fixture
def fake_child(tmp_path, monkeypatch):
    """Select the stand-in child; returns a function that sets its behaviour and reads which jobs it ran."""
    script = tmp_path / "fake_child.py"
    script.write_text(FAKE_CHILD)
    log = tmp_path / "ran.log"
    monkeypatch.setenv(CHILD_HOOK, f"{sys.executable} {script}")
    monkeypatch.setenv("FAKE_LOG", str(log))

    def behave(**by_key):
        monkeypatch.setenv("FAKE_BEHAVIOUR", json.dumps({k.replace("__", ":"): v for k, v in by_key.items()}))
        log.write_text("")
        return lambda: log.read_text().split()
    return behave


def jobs_of(*specs, timeout_s=1.5):
    return [KernelJob("measure", chain, 1, timeout_s=timeout_s, launch={"grid_blocks": 8, "chain": chain})
            for chain in specs]


def test_each_failure_costs_only_its_job_and_every_job_gets_one_result(fake_child, tmp_path):
    fake_child(**{"measure:HANG:1": "hang", "measure:CRASH:1": "crash", "measure:FAULT:1": "fault"})
    results = str(tmp_path / "results.jsonl")
    t0 = time.monotonic()
    run = run_jobs(jobs_of("A", "HANG", "B", "CRASH", "C", "FAULT", "D"), results, str(tmp_path),
                   time.monotonic() + 60)
    took = time.monotonic() - t0
    assert [r.status for r in run.records] == ["ok", "timeout", "ok", "fault", "ok", "fault", "ok"]
    assert run.children == 4 and took < 40                    # a hang costs its 1.5 s, not the run
    timeout, crash = run.records[1], run.records[3]
    assert "timed out after 2 s" in timeout.reason and timeout.launch == {"grid_blocks": 8, "chain": "HANG"}
    assert "exited 139" in crash.reason and "Segmentation fault" in crash.reason
    lines = read_records(results)
    assert [r.event for r in lines].count("start") == 7 and len(final_results(lines)) == 7


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine may have a GPU")
def test_the_real_child_refuses_in_one_line_without_a_gpu(tmp_path, monkeypatch):
    monkeypatch.delenv(CHILD_HOOK, raising=False)
    run = run_jobs(jobs_of("G1", timeout_s=60), str(tmp_path / "r.jsonl"), str(tmp_path), time.monotonic() + 120)
    assert run.records[0].status == "error" and "exited 2" in run.records[0].reason
    assert "no CUDA device" in run.records[0].reason


def test_the_deadline_and_three_hangs_in_a_row_stop_the_stage(fake_child, tmp_path):
    fake_child(**{"measure:*": "hang"})
    results = str(tmp_path / "r.jsonl")
    run = run_jobs(jobs_of("A", "B", "C", "D", "E", timeout_s=0.5), results, str(tmp_path), time.monotonic() + 60)
    assert [r.status for r in run.records] == ["timeout"] * 3 + ["skipped"] * 2
    assert "3 kernels in a row timed out" in run.records[-1].reason
    fake_child()
    run = run_jobs(jobs_of("A", "B"), results, str(tmp_path), time.monotonic() - 1)
    assert {r.reason for r in run.records} == {"not run: the stage's time budget was spent"}


def test_a_result_file_cut_mid_line_still_reads_and_summarises(tmp_path):
    path = tmp_path / "results.jsonl"
    facts = {"dims": [128, 256, 64, 64], "flops": 2e9, "dtype": "fp16", "predicted_unfused_us": 20.0,
             "bottleneck": "l2", "plans": {str(r): {"plan": f"plan {r}", "predicted_us": 5.0 * r, "volumes": {},
                                                    "cluster_size": 2, "occupancy": 1.0} for r in (1, 2)}}
    append(path, Record("chain", "G1", chain="G1", data=facts))
    append(path, Record("done", "measure:G1:1", "measure", "G1", 1, status="timeout", reason="hung"))
    with open(path, "a") as f:
        f.write('{"event": "done", "key": "measure:G1:2", "sta')          # killed mid-write
    append(path, Record("done", "eager:G1:0", "eager", "G1", status="skipped", reason="budget"))
    records = read_records(path)
    assert [r.key for r in records] == ["G1", "measure:G1:1", "eager:G1:0"]   # the cut line is dropped, the next kept
    run = summarize_run(records)
    assert not run.complete and run.gpu is None
    assert [p.error for p in run.rows[0].plans] == ["timeout: hung", "no result: the run ended before it"]


def test_summarize_command_writes_the_report_of_a_partial_run(tmp_path, capsys):
    from fuseflow.cmdline.gpu import main
    path = tmp_path / "results.jsonl"
    facts = {"dims": [128, 256, 64, 64], "flops": 2e9, "dtype": "fp16", "predicted_unfused_us": 20.0,
             "bottleneck": "l2", "plans": {"1": {"plan": "p", "predicted_us": 5.0, "volumes": {}, "cluster_size": 2,
                                                 "occupancy": 1.0}}}
    append(path, Record("chain", "G1", chain="G1", data=facts))
    docs = tmp_path / "gpu.md"
    docs.write_text("a\n<!-- measured:begin -->\nold\n<!-- measured:end -->\n")
    assert main(["summarize", "--results", str(path), "--out", str(tmp_path / "o"), "--docs", str(docs)]) == 0
    assert "Run: partial" in docs.read_text() and (tmp_path / "o" / "unknown_gpu.toml").exists()
    assert main(["summarize", "--results", str(tmp_path / "none.jsonl")]) == 2


def small_opts(tmp_path, **kw):
    limits = StageLimits(smoke_s=30, measure_s=40, sanitize_s=0, smoke_kernel_s=2, kernel_s=2, compile_job_s=2)
    return DeviceRunOptions(("G1", "G2"), str(tmp_path / "out" / "results.jsonl"), str(tmp_path / "work"), topk=2,
                            limits=limits, sanitize=False, **kw)


def test_smoke_gates_the_measurement_and_the_rerun_runs_only_what_failed(fake_child, tmp_path, monkeypatch):
    monkeypatch.setattr(device_run, "compile_plan", lambda k, dtype: (f"/fake/{k.chain.name}{k.rank}.so", "sym"))
    planned = planned_kernels([BENCHMARKS["G1"], BENCHMARKS["G2"]], topk=2)
    picks = smoke_picks(planned)
    bad = picks[0]
    gated = {f"measure:{k.chain.name}:{k.rank}" for k in planned if k.path == bad.path}
    other = next(k for k in planned if k.path != bad.path)
    ran = fake_child(**{f"smoke:{bad.chain.name}:{bad.rank}": "crash",
                        f"measure:{other.chain.name}:{other.rank}": "hang"})
    (tmp_path / "out").mkdir()
    opts = small_opts(tmp_path)
    final = final_results(run_device(opts, progress=lambda line: None))
    assert final[f"smoke:{bad.chain.name}:{bad.rank}"].status == "fault"
    for key in gated:
        assert final[key].status == "skipped" and f"'{bad.path}' failed its smoke run" in final[key].reason
        assert key not in ran()
    assert final[f"measure:{other.chain.name}:{other.rank}"].status == "timeout"
    assert final["env:-:0"].status == "ok" and final["eager:G1:0"].status == "ok"
    failed = {k for k, r in final.items() if r.status != "ok"}

    ran = fake_child()                                     # the rerun: everything works now
    rerun = DeviceRunOptions(**{**opts.__dict__, "rerun": True, "repro_dir": str(tmp_path / "out" / "repro")})
    final = final_results(run_device(rerun, progress=lambda line: None))
    assert set(ran()) == failed                            # only what failed ran again
    assert all(r.status == "ok" for r in final.values())
    assert summarize_run(read_records(opts.results)).complete
    repro = tmp_path / "out" / "repro"
    notes = (repro / "failures.md").read_text()
    assert f"{other.chain.name}_r{other.rank}.cu" in notes and "grid" in notes and "compute-sanitizer" in notes
    assert "int main(" in (repro / f"{other.chain.name}_r{other.rank}.cu").read_text()


def test_the_sanitizer_stage_says_when_the_tool_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(device_run, "find_sanitizer", lambda: None)
    opts = small_opts(tmp_path)
    (tmp_path / "out").mkdir()
    lines = []
    device_run.run_sanitizers([], {}, opts, lines.append)
    assert "compute-sanitizer not found" in lines[0]
    assert read_records(opts.results)[0].event == "sanitize"


def test_sanitizer_runs_are_capped_and_their_verdicts_recorded(tmp_path, monkeypatch):
    """A stand-in compute-sanitizer: clean for one reproducer, errors for another, hangs for the third."""
    from concurrent.futures import Future
    tool = tmp_path / "compute-sanitizer"
    tool.write_text('#!/bin/sh\nfor last; do :; done\ncase "$last" in\n'
                    '  *G1*) echo "========= ERROR SUMMARY: 0 errors";;\n'
                    '  *G2*) echo "========= Invalid __global__ read of size 2"\n'
                    '        echo "========= ERROR SUMMARY: 1 error"; exit 9;;\n'
                    '  *) sleep 30;;\nesac\n')
    tool.chmod(0o755)
    monkeypatch.setattr(device_run, "find_sanitizer", lambda: str(tool))
    kernels = smoke_picks(planned_kernels([BENCHMARKS["G1"], BENCHMARKS["G2"], BENCHMARKS["G3"]], topk=1))
    exes = {}
    for k in kernels:
        exes[(k.chain.name, k.rank)] = done = Future()
        done.set_result(str(tmp_path / f"{k.chain.name}_r{k.rank}"))
    (tmp_path / "out").mkdir()
    opts = DeviceRunOptions(("G1",), str(tmp_path / "out" / "r.jsonl"), str(tmp_path),
                            limits=StageLimits(sanitize_s=8, sanitizer_run_s=2))
    t0 = time.monotonic()
    device_run.run_sanitizers(kernels, exes, opts, lambda line: None)
    assert time.monotonic() - t0 < 15                      # the cap (8 s) holds, whatever hangs
    got = {(r.key, r.chain): r for r in read_records(opts.results)}
    assert got[("memcheck", "G1")].status == "ok" and got[("racecheck", "G1")].status == "ok"
    assert got[("memcheck", "G2")].status == "fault" and "Invalid __global__ read" in got[("memcheck", "G2")].reason
    assert got[("memcheck", "G3")].status == "timeout"
    assert got[("memcheck", "G2")].launch["grid_blocks"] > 0


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "scripts").glob("gpu_*.sh")))
def test_gpu_scripts_parse(script):
    assert {"gpu_device_check.sh", "gpu_device_rerun.sh"} <= {p.name for p in (ROOT / "scripts").glob("gpu_*.sh")}
    proc = subprocess.run(["bash", "-n", str(ROOT / "scripts" / script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine may have a GPU")
def test_the_scripts_refuse_in_seconds_without_a_gpu_or_a_first_run(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable, "PREV": str(tmp_path / "none")}
    proc = subprocess.run(["bash", "scripts/gpu_device_check.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "no CUDA device" in proc.stdout
    assert sorted(os.listdir(tmp_path / "out")) == ["bench.log", "env.txt", "gpu.md"]
    proc = subprocess.run(["bash", "scripts/gpu_device_rerun.sh"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "no first-run results" in proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed: the reproducer is not built")
def test_a_reproducer_builds_into_an_executable(tmp_path):
    from fuseflow.gpu.measuring.sanitizer import build_reproducer
    from fuseflow.gpu.planning.planner import plan_chain
    from fuseflow.gpu.problem.chains import Chain
    chain = Chain("t", "ffn", 64, 128, 64, 64)
    exe = build_reproducer(chain, plan_chain(chain, topk=1).plans[0], str(tmp_path), "repro")
    assert os.access(exe, os.X_OK) and (tmp_path / "repro.cu").exists()
    if shutil.which("nvidia-smi") is None:                 # no GPU: it runs and reports the CUDA error
        proc = subprocess.run([exe], capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0


class CpuTorch:
    """PyTorch on the CPU standing in for CUDA in the child's own logic (no kernel runs: the launcher is faked)."""

    def __init__(self):
        import types

        import torch
        self._torch = torch
        self.cuda = types.SimpleNamespace(synchronize=lambda: None,
                                          current_stream=lambda: types.SimpleNamespace(cuda_stream=0))

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def empty(self, *shape, device=None, **kw):
        return self._torch.empty(*shape, **kw)


def test_the_child_runs_its_jobs_records_each_and_exits_after_a_fault(tmp_path, monkeypatch):
    """kernel_child's own logic on the CPU: smoke checked against the FP32 reference (right, wrong), a measured
    plan's record, and a CUDA fault that ends the child (exit 3) before its next job."""
    import ctypes

    import torch

    from fuseflow.gpu.measuring import kernel_child
    from fuseflow.gpu.measuring.kernel_jobs import write_jobs
    from fuseflow.gpu.measuring.kernel_runner import torch_chain
    from fuseflow.gpu.measuring.measurements import PlanMeasurement
    from fuseflow.gpu.measuring.timing_stats import Timing

    def inputs(chain, dtype, torch_):
        gen = torch.Generator().manual_seed(0)
        M, N, K, L = chain.dims
        return (torch.rand(M, K, generator=gen).half(), (torch.randn(K, N, generator=gen) / K ** 0.5).half(), None,
                (torch.randn(N, L, generator=gen) / N ** 0.5).half())

    def launcher(lib, name, args, stream):
        def run():
            if name == "faulty":
                raise RuntimeError(f"launch of {name} failed with CUDA error 700")
            A, B0, B1, D, E = args
            E.copy_(torch_chain(chain, torch)(A.float(), B0.float(), None, D.float()) * (2 if name == "wrong" else 1))
        return run
    chain = BENCHMARKS["G1"]
    monkeypatch.setattr(kernel_child, "require_cuda", lambda where: CpuTorch())
    monkeypatch.setattr(kernel_child, "make_inputs", inputs)
    monkeypatch.setattr(kernel_child, "kernel_launcher", launcher)
    monkeypatch.setattr(ctypes, "CDLL", lambda path: object())
    monkeypatch.setattr(kernel_child, "measure_plan", lambda torch_, lib, name, ch, rank, plan, *rest: PlanMeasurement(
        ch.name, rank, plan.summary(), 1.0, Timing.from_samples_ms([0.01] * 20, 5), 1e-3, True, {}, 2, 1.0))
    jobs = [KernelJob("smoke", "G1", 1, library="a.so", symbol="right"),
            KernelJob("smoke", "G1", 2, library="a.so", symbol="wrong"),
            KernelJob("measure", "G1", 1, library="a.so", symbol="right"),
            KernelJob("smoke", "G1", 3, library="a.so", symbol="faulty"),
            KernelJob("smoke", "G1", 4, library="a.so", symbol="right")]
    write_jobs(tmp_path / "jobs.json", jobs)
    results = str(tmp_path / "r.jsonl")
    assert kernel_child.main([str(tmp_path / "jobs.json"), results, "0"]) == kernel_child.FAULT_EXIT
    done = [r for r in read_records(results) if r.event == "done"]
    assert [(r.key, r.status) for r in done] == [("smoke:G1:1", "ok"), ("smoke:G1:2", "wrong"),
                                                 ("measure:G1:1", "ok"), ("smoke:G1:3", "fault")]
    assert "max error" in done[1].reason and "CUDA error 700" in done[3].reason
    assert PlanMeasurement.from_json(done[2].data).timing.median_us == 10.0
