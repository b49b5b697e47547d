"""The measuring side of `gpu run` / `gpu bench --run` without a GPU: timing statistics, the model
check (Kendall tau, most wrong, bandwidth fit, device file), the report and the run's budget logic.
Every timing here is made-up test data built in the test, never a measurement."""
import dataclasses
import math
import subprocess
import sys

import pytest
import torch

from fuseflow.gpu.measuring.measurements import (
    ChainMeasurement,
    PlanMeasurement,
    format_measured_table,
    phase_lines,
    summary_lines,
)
from fuseflow.gpu.measuring.timing_stats import Timing, time_cuda
from fuseflow.gpu.problem.device import Device, load_device
from fuseflow.gpu.readout.measured_section import GpuInfo, build_report, observations, replace_section
from fuseflow.gpu.readout.model_check import Observation, fit_bandwidths, most_wrong, rank_correlations


def fake_timing(us, n=20):
    return Timing.from_samples_ms([us / 1e3] * n, warmup=5)


def test_timing_takes_the_median_and_needs_20_runs():
    t = Timing.from_samples_ms([0.001 * v for v in range(1, 22)], warmup=5)   # 1..21 us
    assert (t.median_us, t.min_us, t.runs) == (11.0, 1.0, 21)
    assert Timing.from_json(t.to_json()) == t
    assert t.tflops(11e6) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at least 20"):
        Timing.from_samples_ms([0.01] * 19, warmup=5)
    with pytest.raises(ValueError, match="positive"):
        Timing.from_samples_ms([0.01] * 19 + [0.0], warmup=5)


class FakeEvent:
    """Stands in for torch.cuda.Event: times come from a scripted list (test data)."""
    clock = []

    def __init__(self, enable_timing):
        self.t = None

    def record(self):
        self.t = FakeEvent.clock.pop(0)

    def elapsed_time(self, end):
        return end.t - self.t


class FakeTorch:
    class cuda:
        Event = FakeEvent

        @staticmethod
        def synchronize():
            pass


def test_time_cuda_warms_up_then_times_each_run_between_events():
    calls = []
    FakeEvent.clock = [x for i in range(20) for x in (10.0 * i, 10.0 * i + 0.002 * (i + 1))]
    t = time_cuda(lambda: calls.append(1), FakeTorch, reps=20, warmup=3)
    assert len(calls) == 23 and t.runs == 20 and t.warmup == 3
    assert t.median_us == pytest.approx(21.0) and t.min_us == pytest.approx(2.0)


def obs(chain, rank, pred, meas, **vol):
    return Observation(chain, rank, {"l2": 0, "dsm": 0, **vol}, 2, 1.0, pred, meas)


def test_kendall_tau_and_the_plans_the_model_gets_most_wrong():
    same = [obs("X", i, i * 1e-6, i * 2e-6) for i in range(1, 6)]            # same order, measured 2x slower
    flipped = [obs("Y", i, i * 1e-6, (6 - i) * 1e-6) for i in range(1, 6)]
    corr = {c.chain: c for c in rank_correlations(same + flipped + [obs("Z", 1, 1e-6, 1e-6)])}
    assert corr["X"].tau == pytest.approx(1.0) and corr["Y"].tau == pytest.approx(-1.0)
    assert "Z" not in corr                                                   # fewer than 3 plans
    worst = most_wrong(same + flipped, count=2)
    assert {(o.chain, o.rank) for o in worst} == {("Y", 1), ("Y", 5)}       # 5x off each way


def test_fit_recovers_the_bandwidths_that_made_the_times():
    true_l2, true_dsm4 = 5.0e12, 2.0e12
    made = []
    for i, (vl2, vdsm, occ) in enumerate([(4e9, 1e8, 1.0), (1e8, 3e9, 0.5), (2e9, 2e9, 1.0)]):
        share_l2 = min(1.0, occ / 0.5)
        t = max(vl2 / (true_l2 * share_l2), vdsm / (true_dsm4 * occ))       # the slowest level sets the time
        made.append(Observation("T", i + 1, {"l2": vl2, "dsm": vdsm}, 4, occ, t, t))
    fit = fit_bandwidths(made, mem_saturation=0.5)
    assert fit["bw_l2"].value == pytest.approx(true_l2) and fit["bw_dsm_4"].value == pytest.approx(true_dsm4)
    assert fit["bw_l2"].kernels == 3 and "bw_dsm_2" not in fit


def fake_rows():
    plans = [PlanMeasurement("T1", r, f"plan {r}", 10.0 * r, fake_timing(12.0 * r + (5 if r == 2 else 0)),
                             1e-3, True, {"l2": 1e9, "dsm": 1e8 * r}, 4, 1.0) for r in (1, 2, 3)]
    broken = PlanMeasurement("T2", 1, "plan 1", 8.0, None, math.nan, False, {}, 2, 1.0, "CUDA error 700")
    return [ChainMeasurement("T1", (128, 256, 64, 64), 2e9, plans, fake_timing(30.0), fake_timing(24.0), 25.0,
                             "l2"),
            ChainMeasurement("T2", (128, 256, 64, 64), 2e9, [broken], fake_timing(20.0), None, 16.0, "global")]


def test_report_table_summary_and_device_file(tmp_path):
    rows = fake_rows()
    table = format_measured_table(rows)
    assert "| T1 | 128,256,64,64 | plan 1 | 12.0 | 166.7 |" in table and "2.50 | 2.00 | 10.0 | 2.50 | l2 |" in table
    assert "fails: CUDA error 700" in table
    summary = summary_lines(rows)
    assert summary[0].endswith("1 of 2") and "2.50x" in summary[1] and summary[2].endswith("1 of 1")
    gpu = GpuInfo("TEST GPU (made-up data)", 132, 60_000_000, 4.3e12, "test", "test")
    report = build_report(rows, gpu)
    assert len(report.observations) == 3 and "Kendall tau" in report.markdown
    path = tmp_path / "fit.toml"
    path.write_text(report.device_file)
    dev = load_device(str(path))
    assert dev.l2_bytes == 60_000_000 and dev.bw_global == pytest.approx(4.3e12)
    assert dev.bw_l2 == pytest.approx(max(1e9 / (p.timing.median_us * 1e-6) for p in rows[0].plans), rel=1e-3)
    assert dev.bw_dsm[16] == Device().bw_dsm[16]                               # no kernel used 16 blocks
    page = replace_section("a\n<!-- measured:begin -->\nnot yet\n<!-- measured:end -->\nb", report.markdown)
    assert "not yet" not in page and page.startswith("a\n") and page.endswith("\nb")


def test_observations_skip_plans_that_did_not_run():
    assert [(o.chain, o.rank) for o in observations(fake_rows())] == [("T1", 1), ("T1", 2), ("T1", 3)]


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
@pytest.mark.parametrize("argv", [["run", "--chain", "G5"], ["bench", "--run", "--chains", "G1"],
                                  ["rerun", "--results", "none.jsonl"]])
def test_gpu_commands_say_there_is_no_cuda_device(argv):
    proc = subprocess.run([sys.executable, "-m", "fuseflow.cmdline.gpu", *argv], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no CUDA device" in proc.stderr


def test_phase_shares_are_listed_for_memory_bound_chains_under_target():
    slow = PlanMeasurement("T3", 1, "plan 1", 10.0, fake_timing(25.0), 1e-3, True, {}, 2, 1.0,
                           phase_share={"gemm0": 0.7, "exchange": 0.1, "gemm1": 0.15, "store": 0.05})
    rows = fake_rows() + [ChainMeasurement("T3", (1, 1, 1, 1), 1e9, [slow], fake_timing(30.0), None, 20.0, "l2")]
    assert phase_lines(rows) == ["T3 (1.20x): gemm0 70%, exchange 10%, gemm1 15%, store 5%"]
    compute_bound = dataclasses.replace(rows[-1], bottleneck="compute")
    assert phase_lines([compute_bound]) == []


def parse(argv):
    import argparse

    from fuseflow.cmdline.gpu import add_commands
    parser = argparse.ArgumentParser(prog="fuseflow")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["gpu", *argv])


def test_gpu_run_command_writes_its_measurement(monkeypatch, tmp_path, capsys):
    from fuseflow.cmdline import gpu as cli
    row = fake_rows()[0]
    seen = {}

    def fake_measure(chain, topk, dtype, reps, only_rank):
        seen.update(chain=chain.name, topk=topk, dtype=dtype, reps=reps, only_rank=only_rank)
        return row
    monkeypatch.setattr(cli, "measure_chain", fake_measure)
    monkeypatch.setattr(cli, "measure_compiled", lambda chain, dtype, reps: fake_timing(24.0))
    out = tmp_path / "g5.json"
    args = parse(["run", "--chain", "G5", "--plan", "2", "--dtype", "bf16", "--json-out", str(out)])
    assert args.run(args) == 0
    assert seen == {"chain": "G5", "topk": 1, "dtype": "bf16", "reps": 25, "only_rank": 2}
    assert ChainMeasurement.from_json(__import__("json").loads(out.read_text())) == row
    assert "plan #1: 12.0 us" in capsys.readouterr().out


def records_of(rows, gpu=True):
    """The result lines a GPU run would have written for ``rows`` (made-up test data)."""
    from fuseflow.gpu.measuring.result_log import Record
    out = [Record("done", "env:-:0", "env", "-", status="ok",
                  data={"name": "TEST H200 (made-up data)", "sms": 132, "l2_bytes": 60_000_000,
                        "copy_bandwidth": 4.3e12, "torch_version": "test", "nvcc_version": "test"})] if gpu else []
    for r in rows:
        plans = {str(p.rank): {"plan": p.plan, "predicted_us": p.predicted_us, "volumes": p.volumes,
                               "cluster_size": p.cluster_size, "occupancy": p.occupancy} for p in r.plans}
        facts = {"dims": list(r.dims), "flops": r.flops, "dtype": r.dtype, "plans": plans,
                 "predicted_unfused_us": r.predicted_unfused_us, "bottleneck": r.bottleneck}
        out.append(Record("chain", r.chain, chain=r.chain, data=facts))
        for p in r.plans:
            status = "ok" if p.ok else "fault"
            out.append(Record("done", f"measure:{r.chain}:{p.rank}", "measure", r.chain, p.rank, status=status,
                              reason=p.error, data=p.to_json() if p.ok else {}))
        for stage, t in (("eager", r.torch_unfused), ("compile", r.torch_compiled)):
            out.append(Record("done", f"{stage}:{r.chain}:0", stage, r.chain, status="ok" if t else "skipped",
                              reason="" if t else "budget", data=t.to_json() if t else {}))
    return out


def test_gpu_bench_run_writes_table_device_file_and_docs_section(monkeypatch, tmp_path, capsys):
    from fuseflow.cmdline import gpu as cli
    from fuseflow.gpu.measuring.result_log import append
    monkeypatch.setattr(cli, "require_cuda", lambda where: None)

    def fake_run(opts, progress):
        for rec in records_of(fake_rows()):
            append(opts.results, rec)
    monkeypatch.setattr(cli, "run_device", fake_run)
    docs = tmp_path / "gpu.md"
    docs.write_text("intro\n<!-- measured:begin -->\nNot measured yet.\n<!-- measured:end -->\nend\n")
    args = parse(["bench", "--run", "--chains", "G1,G2", "--out", str(tmp_path / "o"), "--docs", str(docs)])
    assert args.run(args) == 0
    files = sorted(p.name for p in (tmp_path / "o").iterdir())
    assert files == ["h200.toml", "measured.json", "measured.md", "results.jsonl"]
    page = docs.read_text()
    assert "Not measured yet" not in page and "| T1 | 128,256,64,64 |" in page and page.endswith("end\n")
    assert "Run: complete." in page and "fails: fault: CUDA error 700" in page
    assert load_device(str(tmp_path / "o" / "h200.toml")).name == "TEST H200 (made-up data)"
    with pytest.raises(Exception, match="unknown benchmark chain 'X9'"):
        cmd = parse(["bench", "--run", "--chains", "X9", "--out", str(tmp_path / "o")])
        cmd.run(cmd)


def test_gpu_bench_run_refuses_a_docs_page_without_the_section_before_running(monkeypatch, tmp_path):
    from fuseflow.cmdline import gpu as cli
    from fuseflow.errors import UserError
    monkeypatch.setattr(cli, "require_cuda", lambda where: None)
    monkeypatch.setattr(cli, "run_device", lambda *a, **k: pytest.fail("ran before checking --docs"))
    page = tmp_path / "page.md"
    page.write_text("no markers here\n")
    args = parse(["bench", "--run", "--docs", str(page), "--out", str(tmp_path)])
    with pytest.raises(UserError, match="no <!-- measured:begin -->"):
        args.run(args)
