#!/usr/bin/env python3
"""Summarizes bench/ladder/identical.sh's runs into PREFIX.json and PREFIX.md.

Each input is one run of the LoadIdenticalCode test (tests/load_identical_code_test.cpp): every
candidate the reference's own code, every core loaded. Per rung it reports what was judged:
rung 1 (each candidate's speedup over the reference timed around it, its 95% interval and
outcome, and what the start-of-run reference would have made of it), acceptance comparisons,
rung 2 (each promoted copy's geomean over the reference, and the challenges of the best), and the
final rung; and what the rung-1 windows cost.
Usage: summarize_identical.py --machine M --commit C --out PREFIX RUN.json...
"""
import argparse
import datetime
import json
import statistics


def outcomes(events):
    counts = {}
    for e in events:
        counts[e["outcome"]] = counts.get(e["outcome"], 0) + 1
    return counts


def spread(values):
    return [min(values), max(values)] if values else None


def run_summary(run):
    rung1 = run["rung1"]
    final = run["final"]
    final_outcome = ("faster" if final["ci_low"] > 1.01 else
                     "slower" if final["ci_high"] < 1 / 1.01 else "tie")
    return {
        "passed": run.get("test_passed"),
        "load_average_before": run.get("load_average_before"),
        "start_reference_ms": run["start_reference_ms"],
        "rung1_outcomes": outcomes(rung1),
        "rung1_speedups": spread([c["speedup"]["speedup"] for c in rung1]),
        "rung1_start_reference_speedups": spread([c["start_reference_speedup"] for c in rung1]),
        "rung1_scores": spread([c["quick_score"] for c in rung1]),
        "rung1_start_reference_scores": spread([c["start_reference_score"] for c in rung1]),
        "acceptance_outcomes": outcomes(run["acceptance"]),
        "rung2_geomeans": spread([c["geomean_speedup"] for c in run["rung2"]]),
        "challenge_outcomes": outcomes(run["final_challenge"]),
        "challenges": [[c["speedup"], c["ci_low"], c["ci_high"], c["outcome"]]
                       for c in run["final_challenge"]],
        "final": [final["speedup"], final["ci_low"], final["ci_high"], final_outcome],
        "best": run["best"],
        "window_s_mean": statistics.mean(c["window_s"] for c in rung1),
        "window_rounds_mean": statistics.mean(c.get("window_rounds", 2) for c in rung1),
        "device_s_mean": statistics.mean(c["device_s"] for c in rung1),
        "wall_s": run["wall_s"],
    }


def fmt_counts(counts):
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "none"


def fmt_range(r, digits=2):
    return "-" if r is None else f"{r[0]:.{digits}f}-{r[1]:.{digits}f}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--machine", required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    runs = [json.load(open(path)) for path in args.runs]
    summaries = [run_summary(r) for r in runs]
    date = datetime.date.today().isoformat()
    report = {"benchmark": "identical code under load (issue 21)", "machine": args.machine,
              "commit": args.commit, "date": date, "summaries": summaries, "runs": runs}
    with open(args.out + ".json", "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")

    lines = [
        "# identical code under load (cpu)",
        "",
        f"Machine: {args.machine}. Date: {date}. Commit: {args.commit}. "
        "`bench/ladder/identical.sh` (the LoadIdenticalCode test): `kforge optimize "
        "tests/data/softmax_small/task.toml --generator llm --steps 2 --proposals 2`, every "
        "candidate the reference's own code (reference-seed, then copies under an unused "
        "#define), every core busy (3 loops per core until the start-of-run reference is timed, "
        "1 per core after), besides whatever else ran on the shared machine.",
        "",
        "Rung 1 = each candidate's speedup over the reference timed in rounds interleaved with its "
        "quick rounds (from 5b61f12 four reference rounds around three quick rounds; before, one "
        "round just before and one just after) "
        "(95% bootstrap interval; tie unless it clears 1 +- min_gain 1%); \"start ref\" = the "
        "same medians over the reference timed once at the start of the run (the rule before). "
        "S = the scheduler's score (lower bound of the quick speedup). Rung 2 geomean = the "
        "promoted copies over the reference's rung-2 times (from e5d6c83 two short rounds "
        "timed around each copy on every timed workload; before, once per run). Challenges = a copy "
        "with a higher rung-2 geomean timed with the best in interleaved rounds on every timed "
        "workload. Final = the best and the reference in 5 interleaved rounds.",
        "",
        "| run | start ref ms | rung 1 outcomes | rung 1 speedup | over start ref | S | S over start ref "
        "| acceptance | rung 2 geomean | challenges | final | best | test |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, s in enumerate(summaries, 1):
        final = s["final"]
        lines.append(
            f"| {i} | {s['start_reference_ms']:.2f} | {fmt_counts(s['rung1_outcomes'])} "
            f"| {fmt_range(s['rung1_speedups'])} | {fmt_range(s['rung1_start_reference_speedups'])} "
            f"| {fmt_range(s['rung1_scores'])} | {fmt_range(s['rung1_start_reference_scores'])} "
            f"| {fmt_counts(s['acceptance_outcomes'])} | {fmt_range(s['rung2_geomeans'])} "
            f"| {fmt_counts(s['challenge_outcomes'])} "
            f"| {final[0]:.2f}x [{final[1]:.2f}, {final[2]:.2f}] {final[3]} | {s['best']} "
            f"| {'pass' if s['passed'] else 'FAIL'} |")
    window = statistics.mean(s["window_s_mean"] for s in summaries)
    device = statistics.mean(s["device_s_mean"] for s in summaries)
    rounds = statistics.mean(s["window_rounds_mean"] for s in summaries)
    lines += [
        "",
        f"Cost of the rung-1 windows: {window:.2f} s per candidate on average ({rounds:.1f} "
        "reference rounds of EvaluationPolicy::quick_reference, each call with "
        f"the cpu backend's 256 MiB cache flush), {100 * window / device:.0f}% of the "
        f"{device:.1f} s a candidate's rungs 0-1 took (its device seconds, window included).",
        "",
    ]
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
