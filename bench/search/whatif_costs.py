#!/usr/bin/env python3
"""Copies of measured spaces with one rung's device cost changed, for a what-if replay.

The ladder's saving over full fidelity is a ratio of costs: a pruned candidate pays rung 0's gate
workloads and rung 1, a promoted one also the timed workload's check and rung 2, and full
fidelity pays all of it for every candidate. Replaying spaces whose recorded seconds are changed
(`kforge_bench_simulate --spaces OUT`) shows what a cheaper rung would do to that ratio and to the
absolute device seconds before it is built. The verdicts and samples are the measured ones; only
the seconds charged change, so the result is a model and must be reported as one.

usage: whatif_costs.py --spaces bench/search/spaces/cuda --out DIR
                       [--check-s S] [--quick-scale F] [--full-scale F]
  --check-s S      every point's deferred full-size check (gate_full_size_s) costs S seconds
  --quick-scale F  rung 1's seconds (each point's quick_s and the reference's) times F
  --full-scale F   rung 2's seconds (full_s) times F
A space's task path stays as measured (kforge_bench_simulate finds a relative one from the
repository root).
"""
import argparse
import json
import pathlib
import sys

def changed(space, check_s, quick_scale, full_scale):
    """The space with its seconds changed as asked (in place); returns it."""
    for point in space["points"]:
        if check_s is not None and point.get("gate_full_size_s", 0) > 0:
            point["gate_full_size_s"] = check_s
        point["quick_s"] = point.get("quick_s", 0.0) * quick_scale
        point["full_s"] = point.get("full_s", 0.0) * full_scale
    space["reference_quick_s"] = space.get("reference_quick_s", 0.0) * quick_scale
    space["whatif"] = {"check_s": check_s, "quick_scale": quick_scale, "full_scale": full_scale}
    return space


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spaces", required=True, help="folder of measured space files (*.json)")
    parser.add_argument("--out", required=True, help="folder to write the changed copies into")
    parser.add_argument("--check-s", type=float, default=None)
    parser.add_argument("--quick-scale", type=float, default=1.0)
    parser.add_argument("--full-scale", type=float, default=1.0)
    args = parser.parse_args()
    for name, value in (("--check-s", args.check_s), ("--quick-scale", args.quick_scale),
                        ("--full-scale", args.full_scale)):
        if value is not None and not value >= 0:
            sys.exit(f"whatif_costs.py: {name} must be a number >= 0, got {value}")
    spaces = sorted(pathlib.Path(args.spaces).glob("*.json"))
    if not spaces:
        sys.exit(f"whatif_costs.py: no space files (*.json) in {args.spaces}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for path in spaces:
        try:
            space = json.loads(path.read_text())
            changed(space, args.check_s, args.quick_scale, args.full_scale)
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            sys.exit(f"whatif_costs.py: {path} is not a space file ({error})")
        (out / path.name).write_text(json.dumps(space))
    print(f"wrote {len(spaces)} changed spaces to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
