#!/usr/bin/env bash
# The follow-up call after scripts/gpu_device_check.sh: runs again only what the first run's result lines
# record as failed (smoke kernels, plans, PyTorch baselines, jobs the budget left out), on a machine with
# an H200, from the repository root:
#
#     PREV=out/gpu_device/results.jsonl OUT=$OUT bash scripts/gpu_device_rerun.sh
#
# PREV is the first run's results.jsonl (bring it along: out/ is not in git). It is copied to
# $OUT/results.jsonl and the rerun's results are appended to it, so the summary written at the end covers
# both runs (the later result of a job counts). For each failing kernel (up to 8), $OUT/repro/ gets a
# standalone reproducer (<chain>_r<rank>.cu: the kernel and a main that launches it once) and
# failures.md with the kernel's launch parameters, why it failed and the command lines that build it, run
# it and run it under compute-sanitizer.
#
# Time plan (the second call of a 15-minute loan, on the still-warm machine; compiled kernels are reused
# from FUSEFLOW_CUDA_CACHE): smoke <= SMOKE_S (40 s), measurement <= BUDGET_S (90 s), compute-sanitizer on
# the failing kernels <= SANITIZE_S (30 s); hard stop at HARD_S (180 s). Give the call a timeout of 200 s.
set -uo pipefail
PREV=${PREV:-${1:-out/gpu_device/results.jsonl}}
OUT=${OUT:-out/gpu_device_rerun}
PYTHON=${PYTHON:-python3}
SMOKE_S=${SMOKE_S:-40}
BUDGET_S=${BUDGET_S:-90}
SANITIZE_S=${SANITIZE_S:-30}
HARD_S=${HARD_S:-180}
if [ ! -s "$PREV" ]; then
  echo "gpu_device_rerun: no first-run results at $PREV (set PREV=.../results.jsonl)" >&2
  exit 2
fi
mkdir -p "$OUT"
# shellcheck source=scripts/gpu_common.sh
source "$(dirname "$0")/gpu_common.sh"
gpu_env
timeout -k 10 "$HARD_S" "$PYTHON" -m fuseflow.cmdline.gpu rerun --results "$PREV" --topk-measure 4 \
  --smoke-s "$SMOKE_S" --budget-s "$BUDGET_S" --sanitize-s "$SANITIZE_S" --out "$OUT" --docs docs/gpu.md \
  2>&1 | tee "$OUT/rerun.log"
status=${PIPESTATUS[0]}
gpu_summarize_partial "$status" "$OUT" "$OUT/rerun.log"
echo "gpu_device_rerun: rerun exited $status; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit "$status"
