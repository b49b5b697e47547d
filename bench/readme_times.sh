#!/usr/bin/env bash
# Runs every command the README quotes a time for, each under /usr/bin/time, and prints a table:
# the README's figure beside the measured wall time, CPU time (user + system) and peak memory.
# Run it on an otherwise idle machine (the load average is printed before each command).
#
#   bash bench/readme_times.sh            # the commands quoted in seconds (about 5 minutes idle)
#   bash bench/readme_times.sh --all      # also the warm-up and the figure-12 suite (an hour or more)
#
# A command whose exit status is not 0 is shown as failed. Lines of README.md's command list
# that quote a time this script does not run are named at the end, so the list stays complete.
set -u
cd "$(dirname "$0")/.."
FUSEFLOW=.venv/bin/fuseflow
PYTHON=.venv/bin/python
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# quoted figure | command (run from the repository root)
COMMANDS=(
  "no figure (first job after setup)|$FUSEFLOW study fusion --model gcn --dataset karate"
  "about 10 s|$FUSEFLOW study fusion --model gcn --dataset synthetic:cora --scale 0.1"
  "25 s|$FUSEFLOW simulate --model gcn --dataset cora --schedule partial"
  "20 s|$FUSEFLOW study fusion --model gpt3-bigbird --dataset wide --block 16"
  "90 s, 2 GB|$FUSEFLOW study fusion --model gcn --dataset cora"
)
if [ "${1:-}" = "--all" ]; then
  COMMANDS+=(
    "about a minute|$PYTHON -m fuseflow.warmup"
    "about an hour on 2 cores|$FUSEFLOW study suite figure12 --db $OUT/figure12.db"
  )
fi

printf '| command | README says | wall s | CPU s | peak MB | load before (1 min) | status |\n'
printf '|---|---|---|---|---|---|---|\n'
for entry in "${COMMANDS[@]}"; do
  quoted=${entry%%|*}
  command=${entry#*|}
  load=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -f '%e %U %S %M' -o "$OUT/time" bash -c "$command" > "$OUT/stdout" 2> "$OUT/stderr"
  status=$?
  read -r wall user sys peak < <(tail -1 "$OUT/time")
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }')
  peak_mb=$(awk -v k="$peak" 'BEGIN { printf "%.0f", k / 1024 }')
  shown=${command#"$FUSEFLOW "}
  [ "$status" = 0 ] && result=ok || result="failed ($status): $(tail -1 "$OUT/stderr")"
  printf '| `fuseflow %s` | %s | %s | %s | %s | %s | %s |\n' "$shown" "$quoted" "$wall" "$cpu" "$peak_mb" "$load" "$result"
done

# README lines quoting a time in parentheses that the list above does not run
while IFS= read -r line; do
  command=$(sed -E 's/^(fuseflow [^#]*[^ #]) *#.*/\1/' <<< "$line")
  found=no
  for entry in "${COMMANDS[@]}"; do
    [ "${entry#*|}" = ".venv/bin/$command" ] && found=yes
  done
  [ "$found" = no ] && echo "not run here (README quotes a time): $command"
done < <(grep -E '^fuseflow .*#.*\([^)]*[0-9]+ s' README.md)
exit 0
