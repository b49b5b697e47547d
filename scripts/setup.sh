#!/usr/bin/env bash
# Create .venv (once) and install fuseflow with its pinned dependencies and test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
# Graphviz's `dot` draws dataflow graphs (fuseflow compile --svg); install it when we can.
if ! command -v dot >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq graphviz) >/dev/null 2>&1 || echo "note: could not install graphviz"
fi
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch is pinned to the CPU build (an unpinned torch pulls a multi-GB CUDA build).
.venv/bin/python -m pip install --quiet -e '.[test]'
