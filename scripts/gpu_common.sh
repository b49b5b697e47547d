#!/usr/bin/env bash
# Shared by scripts/gpu_device_check.sh and scripts/gpu_device_rerun.sh (sourced, not run): the
# environment of a GPU run and the summary of a run that ended early.

# gpu_env: fuseflow from this checkout, unbuffered output, the kernel cache, the CUDA tools on PATH.
gpu_env() {
  export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
  export FUSEFLOW_CUDA_CACHE=${FUSEFLOW_CUDA_CACHE:-/tmp/fuseflow_cuda}
  export PATH="$PATH:/usr/local/cuda/bin"
}

# gpu_summarize_partial STATUS OUT LOG: when the run exited non-zero (killed at its hard stop, or
# failed) but left result lines, build the report from the lines that arrived.
gpu_summarize_partial() {
  local status=$1 out=$2 log=$3
  if [ "$status" -ne 0 ] && [ -s "$out/results.jsonl" ]; then
    echo "the run exited $status; summarising the results that arrived" | tee -a "$log"
    "$PYTHON" -m fuseflow.cmdline.gpu summarize --results "$out/results.jsonl" --out "$out" --docs docs/gpu.md \
      2>&1 | tail -8 | tee -a "$log"
  fi
  cp docs/gpu.md "$out/gpu.md"
}
