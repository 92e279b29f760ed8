"""Command line of kforge_torch: `python3 -m kforge_torch SUBCOMMAND ...`.

  worker --backend cpu|cuda [--device N]   the reference worker (worker.py)
  candidate-worker --backend cpu|cuda [--device N]
                                           the worker of Python (ModelNew) candidates
                                           (candidate_worker.py)
  derive FILE... [--batch] [--device cpu|cuda] [-o OUT]
                                           derived task(s) of problem files (derive_cli.py,
                                           several files: derive_batch.py)
  fork-server --socket PATH [--sandbox MECHANISM]
                                           forks reference workers from a process that
                                           imported torch once (fork_server.py)
  compile-support                          whether torch.compile works here, as JSON (compiled.py)
  solution RUN_DIR [-o FILE] [--include-dir DIR]...
                                           a finished run's KernelBench-format solution.py
                                           (solution.py)
  model-new-shell --derived FILE [--problem FILE] [-o FILE]
                                           the ModelNew of a task's Triton candidates, with a
                                           marker where the kernel module goes
                                           (solution_shell.py)

Exit status 2 for a bad command line (argparse's own).
"""

import argparse
import os
import sys


def _worker(args):
    from kforge_torch import worker
    return worker.main(args.backend, args.device)


def _candidate_worker(args):
    from kforge_torch import candidate_worker
    return candidate_worker.main(args.backend, args.device)


def _compile_support(_args):
    from kforge_torch import compiled
    return compiled.main()


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

    candidates = commands.add_parser("candidate-worker", help="run Python candidates (a "
                                     "ModelNew source) behind the worker protocol (stdin/stdout)")
    candidates.add_argument("--backend", required=True, choices=["cpu", "cuda"])
    candidates.add_argument("--device", type=int, default=0, metavar="N",
                            help="device index (cuda) or 0 (cpu)")
    candidates.set_defaults(run=_candidate_worker)

    support = commands.add_parser("compile-support", help="print whether torch.compile can be "
                                  "used with this PyTorch and Python, as JSON")
    support.set_defaults(run=_compile_support)

    # `derive` and `solution` parse their own arguments; they are listed here for --help.
    commands.add_parser("derive", help="derive a kforge task (JSON) from a problem file",
                        add_help=False)
    commands.add_parser("solution", help="write a finished run's KernelBench-format solution.py",
                        add_help=False)
    commands.add_parser("model-new-shell", help="the ModelNew of a task's Triton candidates",
                        add_help=False)
    commands.add_parser("fork-server", help="fork reference workers from a process that "
                        "imported torch once", add_help=False)
    return parser


def main(argv=None):
    """Parses `argv` (default sys.argv[1:]) and runs the subcommand; returns its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["solution"]:
        from kforge_torch import solution
        return solution.main(argv[1:])
    if argv[:1] == ["model-new-shell"]:
        from kforge_torch import solution_shell
        return solution_shell.main(argv[1:])
    if argv[:1] == ["fork-server"]:
        from kforge_torch import fork_server
        return fork_server.main(argv[1:])
    if argv[:1] == ["derive"]:
        from kforge_torch import derive_cli
        return derive_cli.main(argv[1:])
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
