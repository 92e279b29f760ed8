"""`python3 -m kforge_torch derive FILE [--device cpu|cuda] [-o OUT.json]`."""
import argparse
import json
import os
import sys
import tempfile

EXIT_ERROR, EXIT_USAGE = 1, 2


def _parser():
    parser = argparse.ArgumentParser(
        prog="kforge-torch derive",
        description="Derive a kforge task (JSON, docs/torch_tasks.md) from a PyTorch problem "
                    "file (class Model, get_inputs(), get_init_inputs()).")
    parser.add_argument("file", metavar="FILE", help="the problem file (.py)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the gate workloads' forwards run (default: cpu)")
    parser.add_argument("--no-capacity-check", action="store_true",
                        help="do not refuse a problem whose tensors exceed --device's memory "
                             "(kforge checks against the device a run uses instead)")
    parser.add_argument("-o", "--output", metavar="OUT.json",
                        help="write the JSON here (atomically) instead of stdout")
    return parser


def write_atomically(path, text):
    """Writes `text` to `path` through a temporary file in the same folder and a rename, so a
    reader never sees a partial file and a failure leaves any old file untouched."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".derive-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def main(argv=None):
    """Runs the derive command; `argv` are its arguments (a leading "derive" is skipped).

    Returns the exit code: 0, 1 for a problem that cannot be derived (`kforge-torch: error:
    FILE: ...` on stderr, nothing written), 2 for a bad command line.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["derive"]:
        argv = argv[1:]
    try:
        arguments = _parser().parse_args(argv)
    except SystemExit as exit_request:  # argparse: --help (0) or a usage error (2)
        return EXIT_USAGE if exit_request.code else 0
    if arguments.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            print("kforge-torch: error: --device cuda: no CUDA device is available here",
                  file=sys.stderr)
            return EXIT_USAGE
    from kforge_torch.derive import derive  # torch loads here, after the command line is good
    from kforge_torch.families import match_family
    from kforge_torch.problem_run import DeriveError
    try:
        derived = derive(arguments.file, {"device": arguments.device,
                                          "capacity_check": not arguments.no_capacity_check},
                         match_family=match_family)
    except DeriveError as error:
        print(f"kforge-torch: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    text = json.dumps(derived, indent=2) + "\n"
    try:
        if arguments.output:
            write_atomically(arguments.output, text)
        else:
            sys.stdout.write(text)
    except OSError as error:
        print(f"kforge-torch: error: {arguments.output}: cannot write ({error.strerror})",
              file=sys.stderr)
        return EXIT_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
