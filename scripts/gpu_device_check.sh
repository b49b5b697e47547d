#!/usr/bin/env bash
# The GPU measurement of docs/gpu.md in one call, for a machine with an H200 (or H100), nvcc and a CUDA
# build of PyTorch (python3), run from the repository root:
#
#     OUT=$OUT bash scripts/gpu_device_check.sh          # results under $OUT (default out/gpu_device)
#
# Time plan of one 15-minute loan of the machine (device time, its start included):
#   the machine's start                                  1-2 min   (not ours)
#   this script: its facts (~10 s), the run hard-stopped
#   at HARD_S (500 s), the summary (~10 s):                        about 8.7 min at most
#     GPU facts, compiles (in parallel, smoke's first),
#     smoke: one launch per code path (20 s limit each)  <= SMOKE_S (120 s)
#     measurement: each chain's top 4 plans whose code
#     path passed (30 s limit each), PyTorch eager,
#     then torch.compile while it lasts                  <= BUDGET_S (270 s)
#     compute-sanitizer memcheck + racecheck, one
#     kernel per code path (skipped if absent)           <= SANITIZE_S (60 s)
#   one rerun of what failed: scripts/gpu_device_rerun.sh          <= 3.3 min
#   together at most 2 + 8.7 + 3.3 = 14 min, if the rerun is called at once (idle time counts too)
# Give the call a timeout of 560 s: the hard stop leaves time to summarise what arrived.
#
# Every kernel runs in a child process under a watchdog: a hang or a CUDA fault costs that kernel (its
# limit, and a fresh child), not the run. Every result is appended to $OUT/results.jsonl as it arrives, so a
# run that is cut short still returns what it measured; the summary is rebuilt from that file at the end
# (also when the run was killed). $OUT keeps few, small files (well under 2 MB):
#   env.txt  bench.log  results.jsonl  measured.json  measured.md  <gpu>.toml (fitted device file)  gpu.md
# The machine needs python3 with a CUDA build of PyTorch and numpy; scipy only for the report's Kendall tau
# (the report can be rebuilt anywhere from results.jsonl: `fuseflow gpu summarize --results ...`).
# Keep them: copy gpu.md over docs/gpu.md and the .toml to src/fuseflow/gpu/devices/; keep results.jsonl
# for the rerun (scripts/gpu_device_rerun.sh) and for `fuseflow gpu summarize --results`.
set -uo pipefail
OUT=${OUT:-out/gpu_device}
PYTHON=${PYTHON:-python3}      # the interpreter that holds a CUDA build of PyTorch
SMOKE_S=${SMOKE_S:-120}
BUDGET_S=${BUDGET_S:-270}
SANITIZE_S=${SANITIZE_S:-60}
HARD_S=${HARD_S:-500}
mkdir -p "$OUT"
# shellcheck source=scripts/gpu_common.sh
source "$(dirname "$0")/gpu_common.sh"
gpu_env
{
  date -u
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  nvcc --version | tail -2
  command -v compute-sanitizer || echo "compute-sanitizer: not found"
  timeout 60 "$PYTHON" -c "
import importlib
for name in ('torch', 'numpy', 'scipy'):
    try:
        print(name, importlib.import_module(name).__version__)
    except ImportError as err:
        print(name, 'missing:', err)
import torch
print('cuda', torch.version.cuda, 'device', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none')"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout -k 10 "$HARD_S" "$PYTHON" -m fuseflow.cmdline.gpu bench --run --topk-measure 4 --smoke-s "$SMOKE_S" \
  --budget-s "$BUDGET_S" --sanitize-s "$SANITIZE_S" --out "$OUT" --docs docs/gpu.md 2>&1 | tee "$OUT/bench.log"
status=${PIPESTATUS[0]}
gpu_summarize_partial "$status" "$OUT" "$OUT/bench.log"
echo "gpu_device_check: run exited $status; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
echo "gpu_device_check: $(du -sh "$OUT" | cut -f1) in all; rerun what failed with scripts/gpu_device_rerun.sh"
exit "$status"
