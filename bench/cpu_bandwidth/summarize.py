#!/usr/bin/env python3
"""Summarizes bench/cpu_bandwidth/run.sh: each task's best CPU kernel against STREAM scale.

The ceiling is the lower of the two STREAM scale measurements taken before and after the runs
(kforge_bench_copy cpu), so a machine that got busier during the runs does not flatter the
kernels. Fraction = the best kernel's achieved GB/s in the final rounds (result.json
final.achieved_gbps, minimum bytes) / that ceiling. Target (issue 6): at least 0.80.
Usage: summarize.py --machine M --commit C --flags F --ceiling BEFORE AFTER --out PREFIX -- RESULT.json...
"""
import argparse
import datetime
import json


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--machine", required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--flags", default="")
    parser.add_argument("--ceiling", nargs=2, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("results", nargs="+")
    args = parser.parse_args()
    ceilings = [json.load(open(path)) for path in args.ceiling]
    stream = min(c["stream_scale_gbps"] for c in ceilings)
    copy = min(c["copy_gbps"] for c in ceilings)
    rows = []
    for path in args.results:
        result = json.load(open(path))
        final = result.get("final") or {}
        best = result.get("best") or {}
        gbps = final.get("achieved_gbps")
        rows.append({"task": result["task"], "best": best.get("id"),
                     "speedup": (final.get("speedup") or {}).get("speedup"),
                     "best_ms": (final.get("best") or {}).get("median_ms"),
                     "achieved_gbps": gbps, "reference_gbps": final.get("reference_gbps"),
                     "fraction_of_stream": gbps / stream if gbps else None,
                     "wall_s": result.get("wall_s")})
    record = {"benchmark": "cpu_bandwidth", "machine": args.machine, "commit": args.commit,
              "flags": args.flags, "date": datetime.date.today().isoformat(),
              "stream_scale_gbps": stream, "copy_gbps": copy, "ceilings": ceilings,
              "target_fraction": 0.80, "tasks": rows}
    with open(args.out + ".json", "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")

    def num(x, fmt):
        return "-" if x is None else fmt.format(x)

    lines = ["# CPU kernels against STREAM bandwidth", "",
             f"Machine: {args.machine}. Date: {record['date']}. Commit: {args.commit}. "
             f"Flags: `{args.flags}`, seed 1, templates generator.", "",
             f"Ceiling: STREAM scale {stream:.1f} GB/s (memcpy {copy:.1f} GB/s), the lower of the "
             "measurements before and after the runs. Achieved = minimum bytes / the best's median "
             "time in the final rounds. Target: 80% of STREAM scale.", "",
             "| task | best | speedup | best ms | achieved GB/s | reference GB/s | of STREAM | wall s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['task']} | `{r['best']}` | {num(r['speedup'], '{:.2f}x')} "
                     f"| {num(r['best_ms'], '{:.3f}')} | {num(r['achieved_gbps'], '{:.1f}')} "
                     f"| {num(r['reference_gbps'], '{:.1f}')} "
                     f"| {num(r['fraction_of_stream'], '{:.0%}')} | {num(r['wall_s'], '{:.0f}')} |")
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
