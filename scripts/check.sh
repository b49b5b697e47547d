#!/usr/bin/env bash
# Before a commit: lint, then the quick suite (tests not marked slow; under a minute).
# CI runs `ruff check` and the whole suite (.ci/run). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
"$PYTHON" -m ruff check .
"$PYTHON" -m pytest -q -m "not slow" "$@"
