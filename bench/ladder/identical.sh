#!/usr/bin/env bash
# Identical code is a tie at every rung on a loaded machine (issue 21): runs the test
# LoadIdenticalCode (tests/load_identical_code_test.cpp) RUNS times, on purpose. Each run is a
# `kforge optimize --generator llm` on the cpu backend whose every candidate is the reference's
# own code (the reference-seed, then copies the loopback model answers), with every core loaded
# by busy loops for the whole run (3 per core until the start-of-run reference is timed, 1 per
# core after). Each run writes its numbers per rung (KFORGE_LOAD_RESULT); summarize_identical.py
# writes OUT/identical_cpu.json and OUT/identical_cpu.md.
#
# usage: bench/ladder/identical.sh [--runs N] [--out DIR] [--tests PATH] [--machine "words"]
#                                  [--commit SHA]
# Minutes per run on a 2-core machine; the test fails (and this script goes on, counting it)
# when a rung judged identical code faster or slower.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
runs=3
out="$root/bench/ladder"
tests="$root/build/ci/tests/kforge_tests"
machine="$(uname -n), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
while (($#)); do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --machine) machine=$2; shift 2 ;;
    --commit) commit=$2; shift 2 ;;
    *) echo "bench/ladder/identical.sh: unknown argument '$1' (see the header for usage)" >&2; exit 2 ;;
  esac
done
[[ -x "$tests" ]] || { echo "bench/ladder/identical.sh: no test binary at $tests (build first)" >&2; exit 1; }

work="$out/runs-identical"
rm -rf "$work"
mkdir -p "$work/tmp"
results=()
for ((run = 1; run <= runs; ++run)); do
  echo "== run $run of $runs (load average before: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  load_before=$(cut -d' ' -f1 /proc/loadavg)
  TMPDIR="$work/tmp" KFORGE_LOAD_TEST=1 KFORGE_LOAD_RESULT="$work/run$run.json" \
    "$tests" --gtest_filter='LoadIdenticalCode.*' > "$work/run$run.log" 2>&1
  status=$?
  if [[ -f "$work/run$run.json" ]]; then
    python3 - "$work/run$run.json" "$status" "$load_before" <<'PY'
import json, sys
path, status, load = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
record = json.load(open(path))
record["test_passed"] = status == 0
record["load_average_before"] = load
json.dump(record, open(path, "w"), indent=2)
PY
    results+=("$work/run$run.json")
  else
    echo "bench/ladder/identical.sh: run $run wrote no result; see $work/run$run.log" >&2
  fi
done
rm -rf "$work/tmp"
python3 "$root/bench/ladder/summarize_identical.py" --machine "$machine" --commit "$commit" \
  --out "$out/identical_cpu" "${results[@]}"
