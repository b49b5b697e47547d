#!/usr/bin/env bash
# Create .venv (once) and install fuseflow with its pinned dependencies and test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
# System packages, installed when we can (as root, with apt-get): Graphviz's `dot` draws dataflow
# graphs (fuseflow compile --svg/--html); Debian's Chromium and its driver run the HTML report's
# browser test (skipped, with the reason, where they are missing).
need=()
command -v dot >/dev/null 2>&1 || need+=(graphviz)
{ command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } || need+=(chromium chromium-driver)
if [ ${#need[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") >/dev/null 2>&1 \
            || echo "note: could not install ${need[*]}; the tests that need them are skipped"
    else
        echo "note: ${need[*]} not installed (that needs root and apt-get); the tests that need them are skipped"
    fi
fi
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch is pinned to the CPU build (an unpinned torch pulls a multi-GB CUDA build). pip byte-compiles
# what it installs (not --no-compile: where PYTHONDONTWRITEBYTECODE is set, every run would then
# compile its imports again, 10 s of CPU for a study).
.venv/bin/python -m pip install --quiet -e '.[test]'
# Compile the simulator's numba kernels that the README's first command uses into numba's on-disk
# cache now (about a minute on 2 cores), then the others in the background at low priority (a few
# minutes of one core; its log in .venv/warmup.log). A kernel not in the cache yet compiles on
# first use (a second or two) and is kept; saves into the cache are locked per kernel.
.venv/bin/python -m fuseflow.warmup
nohup nice -n 19 .venv/bin/python -m fuseflow.warmup --all --processes 1 >.venv/warmup.log 2>&1 </dev/null &
