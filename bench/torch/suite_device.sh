#!/usr/bin/env bash
# Runs (or continues) `kforge suite` over a folder of PyTorch problems on the GPU machine, within
# one device call's time, and sends back the suite's tables, checks and logs plus the time each
# invocation took. Run it again with the same SUITE_DIR to continue a suite the deadline stopped
# (the suite is resumable: finished rows are kept). At the end, with every row done,
# `ingest_bench.py reanalyze` splits the summed time over the suite's parts.
#
#   bench/torch/suite_device.sh PROBLEMS_DIR SUITE_DIR DEADLINE_S [kforge suite options...]
#
# Expects build/release/kforge (carried, see scripts/gpu-check) and $OUT (the device tool's).
set -uo pipefail
problems=$1 suite_dir=$2 deadline=$3
shift 3
out="${OUT:-/tmp/kforge-out}"
mkdir -p "$out" "$suite_dir"
start=$(date +%s.%N)
# SIGTERM at the deadline: the suite stops the task in flight and keeps what it wrote.
timeout -s TERM "$deadline" build/release/kforge suite "$problems" --suite-dir "$suite_dir" "$@" \
  > "$out/suite.log" 2>&1
code=$?
seconds=$(python3 -c "import time; print(round(time.time() - $start, 3))")
echo "$seconds $code" >> "$suite_dir/invocations.txt"
echo "suite exit $code after $seconds s"
total=$(awk '{ s += $1 } END { print s }' "$suite_dir/invocations.txt")
python3 - "$suite_dir" "$total" "$code" "$*" <<'PY'
import json, pathlib, sys
suite_dir, total, code, args = pathlib.Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
record = {"what": "suite", "command": "suite " + args, "total_wall_s": total, "exit_code": code,
          "invocations": [l.split() for l in (suite_dir / "invocations.txt").read_text().splitlines()]}
(suite_dir / "record.json").write_text(json.dumps(record))
PY
python3 bench/torch/ingest_bench.py reanalyze --suite-dir "$suite_dir" \
  --out "$out/suite_overhead.json" "$suite_dir/record.json" > /dev/null 2>&1 || true
tar czf "$out/suite.tgz" -C "$suite_dir" suite.json suite.md invocations.txt checks logs derived \
  2>/dev/null
cat "$suite_dir/suite.md" 2>/dev/null | head -70
