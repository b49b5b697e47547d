#!/usr/bin/env bash
# Regenerate docs/results.md's Figure-12 and Figure-14 sections, docs/figure12.png and docs/figure14.png
# (and .pdf) from the suite's database: runs the figure12 suite first, or resumes it where it stopped
# (out/figure12.db), then renders the tables, the published numbers beside ours and the charts. Extra
# flags go to `fuseflow study suite` (e.g. --scheduler tcp://host:8786, --workers 2, or --limit 0 to
# render without running anything).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out
.venv/bin/fuseflow study suite figure12 --db out/figure12.db --page docs/results.md --figure docs/figure12.png "$@"
.venv/bin/fuseflow plot out/figure12.db --figure 12 --suite figure12 -o docs/figure12.pdf
.venv/bin/fuseflow plot out/figure12.db --figure 14 --suite figure12 -o docs/figure14.pdf
