#!/usr/bin/env bash
# Create .venv (once) and install fuseflow with its pinned dependencies and test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch is pinned to the CPU build (an unpinned torch pulls a multi-GB CUDA build).
.venv/bin/python -m pip install --quiet -e '.[test]'
