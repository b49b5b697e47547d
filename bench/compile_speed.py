"""Compile time of every built-in preset: seconds per preset and each model's peak memory.

    python bench/compile_speed.py                          # every model, dataset and preset
    python bench/compile_speed.py --model gpt3-bigbird --dataset wide --preset full
    python bench/compile_speed.py --model gcn --dataset synthetic:collab --json out.json

A preset's time is `fuseflow.compile(case.program, preset, data=case.inputs)`, what `fuseflow
compile --model M --dataset D --schedule P` does after loading the model (default orders
weighed by the data's densities); each row shows a preset's wall seconds and, in parentheses,
the CPU seconds of the process (the fair measure on a shared machine). Each model and dataset
runs in a child process: its peak memory is that child's peak resident set (what `/usr/bin/time
-f %M` reports: Python, torch, the model's data and the compiler), and `--graphs DIR` writes
every compiled graph as JSON there, to compare the compiler's output before and after a change (`--compare DIR` does).
GPT-3's presets are compiled at each `--block`; `<preset>-unblocked` are its presets on scalar
streams. Not a test: pytest does not collect this directory.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

DEFAULT_BLOCKS = (16,)


def _cases(args) -> list[tuple[str, str, int]]:
    from fuseflow.models.registry import BLOCKED_MODELS, MODELS, datasets_of

    cases = []
    for model in args.model or MODELS:
        blocks = args.block if model in BLOCKED_MODELS else [16]
        for dataset in args.dataset or datasets_of(model):
            if dataset in datasets_of(model):
                cases += [(model, dataset, block) for block in blocks]
    return cases


def _graphs_json(compiled) -> list:
    return [None if k.graph is None else k.graph.to_json() for k in compiled.kernels]


def _child(model: str, dataset: str, block: int, presets: list[str] | None, graphs: str | None) -> dict:
    """Build the model once, compile each preset; seconds per preset and the peak memory."""
    import fuseflow
    from fuseflow.models.registry import build

    start = time.perf_counter()
    case = build(model, dataset=dataset, block=block)
    built = time.perf_counter() - start
    seconds, cpu = {}, {}
    for preset, schedule in case.presets.items():
        if presets and preset not in presets:
            continue
        start, start_cpu = time.perf_counter(), time.process_time()
        compiled = fuseflow.compile(case.program, schedule, data=case.inputs)
        seconds[preset] = time.perf_counter() - start
        cpu[preset] = time.process_time() - start_cpu
        if graphs:
            path = os.path.join(graphs, f"{model}-{dataset.replace(':', '_')}-b{block}-{preset}.json")
            with open(path, "w") as f:
                json.dump(_graphs_json(compiled), f, sort_keys=True, default=str)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"model": model, "dataset": dataset, "block": block, "build_s": built, "compile_s": seconds,
            "cpu_s": cpu, "peak_bytes": peak}


def _run_child(case, args) -> dict:
    model, dataset, block = case
    command = [sys.executable, __file__, "--child", model, dataset, str(block)]
    command += [x for p in args.preset or [] for x in ("--preset", p)]
    command += ["--graphs", args.graphs] if args.graphs else []
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"model": model, "dataset": dataset, "block": block, "error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _print_row(row: dict) -> None:
    what = f"{row['model']} {row['dataset']}" + (f" b{row['block']}" if row["model"] == "gpt3-bigbird" else "")
    if "error" in row:
        print(f"{what:<32} failed: {' '.join(row['error'])}", flush=True)
        return
    times = "  ".join(f"{p} {s:.1f} ({row['cpu_s'][p]:.1f})" for p, s in row["compile_s"].items())
    print(f"{what:<32} {times}   (peak {row['peak_bytes'] / 2**30:.2f} GiB, model built in {row['build_s']:.1f} s)",
          flush=True)


def _compare(before: str, after: str) -> int:
    """Names of graph files that differ between two --graphs directories (exit 1 if any)."""
    names = sorted(set(os.listdir(before)) & set(os.listdir(after)))
    differ = [n for n in names if open(os.path.join(before, n)).read() != open(os.path.join(after, n)).read()]
    print(f"{len(names)} compiled presets compared, {len(differ)} differ" + "".join(f"\n  {n}" for n in differ))
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="gcn, graphsage, sae, gpt3-bigbird (repeatable)")
    parser.add_argument("--dataset", action="append", help="a dataset of the model (repeatable; default all)")
    parser.add_argument("--preset", action="append", help="unfused, partial, full, ... (repeatable; default all)")
    parser.add_argument("--block", action="append", type=int, help="GPT-3 block sizes (default 16)")
    parser.add_argument("--graphs", metavar="DIR", help="write each compiled preset's graphs as JSON into DIR")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two --graphs directories")
    parser.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.compare:
        return _compare(*args.compare)
    if args.child:
        model, dataset, block = args.child
        print(json.dumps(_child(model, dataset, int(block), args.preset, args.graphs)))
        return 0
    args.block = args.block or list(DEFAULT_BLOCKS)
    if args.graphs:
        os.makedirs(args.graphs, exist_ok=True)
    rows = []
    for case in _cases(args):
        rows.append(_run_child(case, args))
        _print_row(rows[-1])
    slowest = max((s for r in rows for s in r.get("compile_s", {}).values()), default=0.0)
    slowest_cpu = max((s for r in rows for s in r.get("cpu_s", {}).values()), default=0.0)
    print(f"slowest preset: {slowest:.1f} s wall, {slowest_cpu:.1f} s of CPU")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
