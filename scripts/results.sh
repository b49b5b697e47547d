#!/usr/bin/env bash
# Regenerate the fusion-study tables of docs/results.md (JSON rows in out/results/).
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p out/results
run() { .venv/bin/fuseflow study fusion "$@" --json > "out/results/$(echo "$*" | tr ' :/' '___').json" || echo "failed: $*"; }
run --model gcn --dataset karate
run --model graphsage --dataset karate
run --model gcn --dataset cora
run --model graphsage --dataset cora
run --model gcn --dataset cora_ml
run --model graphsage --dataset cora_ml
run --model sae --dataset small
run --model sae --dataset imagenet
run --model gpt3-bigbird --dataset tiny --block 16
for b in 16 32 64; do run --model gpt3-bigbird --dataset mini --block "$b"; done
for b in 16 32 64; do run --model gpt3-bigbird --dataset wide --block "$b"; done
for b in 16 32 64; do run --model gpt3-bigbird --dataset deep --block "$b"; done
