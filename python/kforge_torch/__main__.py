"""Command line of kforge_torch: `python3 -m kforge_torch SUBCOMMAND ...`.

  worker --backend cpu|cuda [--device N]   the reference worker (worker.py)

Exit status 2 for a bad command line (argparse's own).
"""

import argparse
import os
import sys


def _worker(args):
    from kforge_torch import worker
    return worker.main(args.backend, args.device)


def build_parser():
    """The argparse parser with one subparser per subcommand."""
    parser = argparse.ArgumentParser(prog="python3 -m kforge_torch",
                                     description="kforge's PyTorch problems (docs/torch_tasks.md)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    worker = commands.add_parser("worker", help="run a problem module as the task's reference "
                                 "behind the worker protocol (stdin/stdout)")
    worker.add_argument("--backend", required=True, choices=["cpu", "cuda"])
    worker.add_argument("--device", type=int, default=0, metavar="N",
                        help="device index (cuda) or 0 (cpu)")
    worker.set_defaults(run=_worker)

    # The `derive` subcommand (derive.py) is added here by its own module.
    return parser


def main(argv=None):
    """Parses `argv` (default sys.argv[1:]) and runs the subcommand; returns its exit status."""
    args = build_parser().parse_args(argv)
    if getattr(args, "device", 0) < 0:
        sys.stderr.write("kforge-torch: error: --device must be >= 0\n")
        return 2
    return args.run(args)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without running atexit handlers a problem module may have installed.
    os._exit(code)
