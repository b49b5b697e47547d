"""`fuseflow gpu plan` and `fuseflow gpu bench` through an argparse parser built with add_commands."""
import argparse
import json

import pytest

from fuseflow.cmdline.gpu import add_commands
from fuseflow.errors import UserError


def run(argv, capsys):
    parser = argparse.ArgumentParser(prog="fuseflow")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code = args.run(args)
    return code, capsys.readouterr().out


def test_plan_text_lists_ranked_plans_counts_and_baselines(capsys):
    code, out = run(["gpu", "plan", "--chain", "G5", "--topk", "3"], capsys)
    assert code == 0
    assert "pruning: original 1.3757e+13" in out          # 41 x 625 x 8 x 1024 x 256 x 256
    ranked = [line for line in out.splitlines() if line[:2].strip().isdigit()]
    assert len(ranked) == 3
    assert "baseline unfused" in out and "smem-only (fails" in out


def test_plan_json_round_trips(capsys):
    code, out = run(["gpu", "plan", "--chain", "ffn:128,256,64,64:gelu", "--topk", "2", "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and len(data["plans"]) == 2
    best = data["plans"][0]
    assert set(best["volumes"]) == {"global", "l2", "dsm", "smem", "reg"}
    assert best["cost_s"] == max(best["times"].values())  # the slowest level or compute
    assert [b["name"] for b in data["baselines"]] == ["unfused", "smem-only"]


def test_plan_with_device_file(tmp_path, capsys):
    f = tmp_path / "h800.toml"
    f.write_text('name = "H800"\nbw_global = 2.0e12\n')
    code, out = run(["gpu", "plan", "--chain", "C1", "--topk", "1", "--device", str(f)], capsys)
    assert code == 0 and "device H800" in out


@pytest.mark.parametrize("argv,needle", [
    (["gpu", "plan", "--chain", "X9"], "benchmark id"),
    (["gpu", "plan", "--chain", "G1", "--topk", "0"], "--topk"),
    (["gpu", "plan", "--chain", "G1", "--device", "/no/such.json"], "cannot read"),
    (["gpu", "bench", "--chains", "G1,Z3"], "unknown benchmark"),
])
def test_bad_input_raises_user_error(argv, needle, capsys):
    with pytest.raises(UserError, match=needle):
        run(argv, capsys)


def test_gpu_needs_a_subcommand(capsys):
    with pytest.raises(SystemExit):
        run(["gpu"], capsys)


def test_bench_subset_json(capsys):
    code, out = run(["gpu", "bench", "--chains", "G1,S8,C4", "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and [r["chain"]["name"] for r in data["rows"]] == ["G1", "S8", "C4"]
    for row in data["rows"]:
        assert row["unfused_over_fused"]["global"] >= 1.0
