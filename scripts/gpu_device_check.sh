#!/usr/bin/env bash
# The GPU measurement of docs/gpu.md in one command, for a machine with a Hopper GPU (H200/H100),
# nvcc and a CUDA build of PyTorch (python3), run from the repository root:
#
#     bash scripts/gpu_device_check.sh            # results under $OUT (default out/gpu_device)
#
# It records the machine, runs `fuseflow gpu bench --run` over all 26 chains (each chain's top-4
# plans compiled with nvcc for sm_90a, checked against PyTorch FP32, timed with CUDA events beside
# PyTorch eager and torch.compile; Kendall tau; the L2/DSM bandwidth fit) within a 7-minute budget,
# rewrites the measured section of docs/gpu.md, and leaves in $OUT (at most 8 files):
#   env.txt  bench.log  measured.json  measured.md  <gpu>.toml (fitted device file)  gpu.md
# Copy gpu.md over docs/gpu.md and the .toml to src/fuseflow/gpu/devices/ to keep them.
set -uo pipefail
OUT=${OUT:-out/gpu_device}
BUDGET_S=${BUDGET_S:-400}
PYTHON=${PYTHON:-python3}      # the interpreter that holds a CUDA build of PyTorch
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export FUSEFLOW_CUDA_CACHE=${FUSEFLOW_CUDA_CACHE:-/tmp/fuseflow_cuda}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  nvcc --version | tail -2
  "$PYTHON" -c "import torch, scipy, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda,
'scipy', scipy.__version__, 'numpy', numpy.__version__, 'device', torch.cuda.get_device_name(0))"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout $((BUDGET_S + 80)) "$PYTHON" -m fuseflow.cmdline.gpu bench --run --topk-measure 4 --budget-s "$BUDGET_S" \
  --out "$OUT" --docs docs/gpu.md 2>&1 | tee "$OUT/bench.log"
status=${PIPESTATUS[0]}
cp docs/gpu.md "$OUT/gpu.md"
echo "gpu_device_check: bench exited $status; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit "$status"
