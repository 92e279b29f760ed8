#!/usr/bin/env bash
# What one poll of the --executor slurm driver costs on the Slurm side: the executor's own squeue
# command (slurm_client.cpp: --noheader --states=all --format=%i|%T|%r|%N --jobs=IDS) with N
# job ids, against a private local Slurm (tests/slurm/start-local-slurm) holding N held jobs.
# Needs root, slurm-wlm and munge. Prints JSON lines {"jobs": N, "squeue_s": [...]}.
#   bench/slurm/squeue_cost.sh [MAX_JOBS]        (default 1000; port 16917 to stay off the tests')
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
max="${1:-1000}"
slurm="/tmp/kfsq-$$"
trap '"$root/tests/slurm/stop-local-slurm" "$slurm" >/dev/null 2>&1; rm -rf "$slurm"' EXIT
export KFORGE_SLURM_PORT=16917 SLURM_CONF="$slurm/slurm.conf"
"$root/tests/slurm/start-local-slurm" "$slurm" >/dev/null
ids=()
submit_start=$(date +%s.%N)
for _ in $(seq 1 "$max"); do
  ids+=("$(sbatch --parsable --hold --output=/dev/null --wrap true)")
done
submit_s=$(echo "$(date +%s.%N) - $submit_start" | bc)
echo "{\"sbatch_s_mean\": $(echo "$submit_s / $max" | bc -l)}"
for n in 1 10 100 1000 "$max"; do
  [ "$n" -le "$max" ] || continue
  list=$(IFS=,; echo "${ids[*]:0:$n}")
  times=()
  for _ in 1 2 3 4 5; do
    t0=$(date +%s.%N)
    squeue --noheader --states=all --format='%i|%T|%r|%N' --jobs="$list" >/dev/null
    times+=("$(echo "$(date +%s.%N) - $t0" | bc)")
  done
  echo "{\"jobs\": $n, \"squeue_s\": [$(IFS=,; echo "${times[*]}")]}"
done
scancel "${ids[@]}" >/dev/null 2>&1 || true
