#!/usr/bin/env python3
"""Summarizes bench/ladder/run.sh's result.json files into NAME.json and NAME.md.

For each task it pairs the --fidelity ladder run with the --fidelity full run and reports what
the issue asks: device-seconds and wall time until the final best was first found
(result.json "to_final_best": the budget spent when its rung 1 ended), the totals, whether both
runs ended with the same best candidate, and their final (paired, rung 3) speedups.
Usage: summarize.py --backend B --machine M --commit C [--flags F] --out PREFIX RESULT.json...
"""
import argparse
import datetime
import json
import math
import sys


def row(result):
    found = result.get("to_final_best") or {}
    spent = result["budget"]["spent"]
    final = result.get("final") or {}
    occupancy = result.get("rung_occupancy") or [0, 0, 0, 0]
    best = result.get("best") or {}
    return {
        "best": best.get("id"),
        # rung 2: geometric mean over every timed workload of the best's speedup over the reference
        "best_rung2_geomean": best.get("full_geomean_speedup"),
        "speedup": (final.get("speedup") or {}).get("speedup"),
        "found_device_s": found.get("device_s"),
        "found_wall_s": found.get("wall_s"),
        "device_s": spent["device_s"],
        "wall_s": result["wall_s"],
        "candidates": len(result["candidates"]),
        "rung2": occupancy[2] + occupancy[3],
    }


def ratio(a, b):
    return a / b if a and b else None


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--backend", "--machine", "--commit", "--out"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--flags", default="")
    parser.add_argument("results", nargs="+")
    args = parser.parse_args()
    runs = {}
    for path in args.results:
        with open(path) as f:
            result = json.load(f)
        runs.setdefault(result["task"], {})[result["fidelity"]] = row(result)
    tasks = []
    for task, by_fidelity in sorted(runs.items()):
        if set(by_fidelity) != {"ladder", "full"}:
            sys.exit(f"summarize.py: {task}: need one ladder and one full run, got {sorted(by_fidelity)}")
        ladder, full = by_fidelity["ladder"], by_fidelity["full"]
        tasks.append({"task": task, "ladder": ladder, "full": full,
                      "same_best": ladder["best"] == full["best"],
                      "found_device_s_ratio": ratio(ladder["found_device_s"], full["found_device_s"]),
                      "found_wall_s_ratio": ratio(ladder["found_wall_s"], full["found_wall_s"])})
    ratios = [t["found_device_s_ratio"] for t in tasks if t["found_device_s_ratio"]]
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None
    record = {"benchmark": "ladder_vs_full", "backend": args.backend, "machine": args.machine,
              "commit": args.commit, "flags": args.flags,
              "date": datetime.date.today().isoformat(), "tasks": tasks,
              "geomean_found_device_s_ratio": geomean}
    with open(args.out + ".json", "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")

    def num(x, fmt="{:.1f}"):
        return "-" if x is None else fmt.format(x)

    lines = [f"# ladder vs full fidelity ({args.backend})", "",
             f"Machine: {args.machine}. Date: {record['date']}. Commit: {args.commit}. "
             f"Flags: `{args.flags or '(defaults)'}`, seed 1, templates generator, fresh memory "
             f"and artifact cache per run.", "",
             "Device s / wall s to best = budget spent when the final best finished rung 1; "
             "rung 2 = candidates that ran it; speedup = the final paired rounds (rung 3) on the "
             "primary timed workload; rung-2 geomean = the best's speedup over the reference, "
             "geometric mean over every timed workload.", "",
             "| task | fidelity | best | speedup | rung-2 geomean | device s to best "
             "| wall s to best | device s total | wall s total | candidates | rung 2 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in tasks:
        for fidelity in ("ladder", "full"):
            r = t[fidelity]
            lines.append(f"| {t['task']} | {fidelity} | `{r['best']}` | {num(r['speedup'], '{:.2f}x')} "
                         f"| {num(r['best_rung2_geomean'], '{:.2f}x')} "
                         f"| {num(r['found_device_s'])} | {num(r['found_wall_s'])} "
                         f"| {num(r['device_s'])} | {num(r['wall_s'])} | {r['candidates']} "
                         f"| {r['rung2']} |")
    lines += ["", "| task | same final best | ladder/full device s to best | ladder/full wall s to best |",
              "|---|---|---|---|"]
    for t in tasks:
        lines.append(f"| {t['task']} | {'yes' if t['same_best'] else 'no'} "
                     f"| {num(t['found_device_s_ratio'], '{:.2f}')} | {num(t['found_wall_s_ratio'], '{:.2f}')} |")
    lines += ["", f"Geometric mean of ladder/full device seconds to the final best: "
              f"{num(geomean, '{:.2f}')}."]
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
