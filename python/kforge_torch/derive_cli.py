"""`python3 -m kforge_torch derive FILE... [--batch] [--device cpu|cuda] [-o OUT.json]`."""
import argparse
import json
import os
import sys
import tempfile

EXIT_ERROR, EXIT_USAGE = 1, 2


def _parser():
    from kforge_torch.derive_batch import DEFAULT_TIME_LIMIT_S
    parser = argparse.ArgumentParser(
        prog="kforge-torch derive",
        description="Derive a kforge task (JSON, docs/torch_tasks.md) from a PyTorch problem "
                    "file (class Model, get_inputs(), get_init_inputs()). With several files "
                    "(or --batch), derive each in one process (torch imported once) and print "
                    "one JSON line per file: {file, ok, task | error, seconds, cpu_s}.")
    parser.add_argument("files", nargs="+", metavar="FILE", help="the problem file(s) (.py)")
    parser.add_argument("--batch", action="store_true",
                        help="print JSON lines (one per file) even for one file; a problem "
                             "that cannot be derived is its line's error, exit status 0")
    parser.add_argument("--time-limit-s", type=float, default=DEFAULT_TIME_LIMIT_S,
                        metavar="S", help="batch: stop a problem's derivation after S seconds "
                                          f"(default {DEFAULT_TIME_LIMIT_S:g})")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the gate workloads' forwards run (default: cpu)")
    parser.add_argument("--no-capacity-check", action="store_true",
                        help="do not refuse a problem whose tensors exceed --device's memory "
                             "(kforge checks against the device a run uses instead)")
    parser.add_argument("-o", "--output", metavar="OUT.json",
                        help="one file: write the JSON here (atomically) instead of stdout")
    parser.add_argument("--end-at-stdin-eof", action="store_true",
                        help="one file: exit (status 1) as soon as stdin reaches its end: the "
                             "caller keeps a pipe open while it waits, so a derivation stuck in "
                             "the module's code ends with the caller (Ctrl-C, a kill)")
    return parser


def end_at_stdin_eof():
    """Starts a daemon thread that exits the process (status 1, a line on stderr) once stdin
    reaches its end. The caller holds the pipe's other end: when it dies, for whatever reason,
    the kernel closes it, and a module's forward in an endless loop does not outlive the caller
    (the thread gets the GIL back between the loop's bytecodes). Not for a process that forks
    (derive_batch.py): the thread would hold locks across the fork."""
    import threading

    def watch():
        try:
            while sys.stdin.buffer.read(65536):
                pass
        except (OSError, ValueError):
            pass
        try:  # the caller that reads stderr is usually gone: a write may raise BrokenPipeError
            print("kforge-torch: error: stdin closed: the process that started this derivation "
                  "ended, so it ends too", file=sys.stderr, flush=True)
        finally:
            os._exit(EXIT_ERROR)

    threading.Thread(target=watch, name="end-at-stdin-eof", daemon=True).start()


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


def _usage_error(message):
    print(f"kforge-torch: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv=None):
    """Runs the derive command; `argv` are its arguments (a leading "derive" is skipped).

    One file: returns 0, 1 for a problem that cannot be derived (`kforge-torch: error: FILE:
    ...` on stderr, nothing written), 2 for a bad command line. Batch (several files or
    --batch): 0 once every file has its line on stdout (derive_batch.py), 2 for a bad command
    line.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["derive"]:
        argv = argv[1:]
    try:
        arguments = _parser().parse_args(argv)
    except SystemExit as exit_request:  # argparse: --help (0) or a usage error (2)
        return EXIT_USAGE if exit_request.code else 0
    options = {"device": arguments.device, "capacity_check": not arguments.no_capacity_check}
    from kforge_torch.allocator import reuse_freed_memory
    reuse_freed_memory()
    if arguments.batch or len(arguments.files) > 1:
        if arguments.output:
            return _usage_error("-o takes one file; a batch prints JSON lines on stdout")
        if not arguments.time_limit_s > 0:
            return _usage_error(f"--time-limit-s: expected seconds > 0, got "
                                f"{arguments.time_limit_s:g}")
        from kforge_torch import derive_batch
        if arguments.end_at_stdin_eof:
            return _usage_error("--end-at-stdin-eof takes one file (a batch forks)")
        return derive_batch.run_batch(arguments.files, options, arguments.time_limit_s,
                                      derive_batch.private_stdout())
    if arguments.end_at_stdin_eof:
        end_at_stdin_eof()
    return _derive_one(arguments.files[0], options, arguments.output)


def _derive_one(path, options, output):
    if options["device"] == "cuda":
        import torch
        if not torch.cuda.is_available():
            return _usage_error("--device cuda: no CUDA device is available here")
    from kforge_torch.derive import derive  # torch loads here, after the command line is good
    from kforge_torch.families import match_family
    from kforge_torch.problem_run import DeriveError
    try:
        derived = derive(path, options, match_family=match_family)
    except DeriveError as error:
        print(f"kforge-torch: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    text = json.dumps(derived, indent=2) + "\n"
    try:
        if output:
            write_atomically(output, text)
        else:
            sys.stdout.write(text)
    except OSError as error:
        print(f"kforge-torch: error: {output}: cannot write ({error.strerror})", file=sys.stderr)
        return EXIT_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
