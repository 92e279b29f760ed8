"""Deriving many problem files with one import of torch (`derive --batch`, docs/torch_tasks.md).

Importing torch costs seconds (PyTorch 2.11 on the H200 machine: 1.9 s from kforge's bytecode
folder, 4.8-6.8 s without it), more than deriving most problems, so a suite derives all of its
problems in one Python process. That process imports torch and the derivation once, then forks
one child per problem and derives it there:

- isolation: a problem's module, the globals and torch settings it changes (default dtype, grad
  mode, monkeypatched functions), the modules it imports and the memory it takes end with its
  child, so no problem sees what an earlier one did; each child seeds Python's, numpy's and
  torch's random generators with the same seed, so a problem derives the same alone or in a batch;
- a time limit per problem: a child past it is killed (SIGKILL) and that problem's result says
  so; one that crashes (a signal, a C++ abort) is that problem's error; the others go on.

The parent never runs a tensor operation: OpenMP thread pools and CUDA do not survive a fork, and
neither exists in the parent. Children stay in the parent's process group, so whoever kills the
batch (the orchestrator kills the group) kills them too. stdout carries only the results, one
JSON object per line, in the order of the files; what problems print goes to stderr.
"""
import json
import os
import random
import select
import signal
import sys
import time
import traceback

# The seed of Python's, numpy's and torch's generators at the start of every problem.
PROBLEM_RNG_SEED = 0
# A hung problem is stopped after this long by default: a derivation runs the forward a few
# dozen times at small sizes, seconds on a 2-core host.
DEFAULT_TIME_LIMIT_S = 300.0


def result_line(path, outcome):
    """One line of batch output (JSON, no newline) for the problem at `path`.

    outcome: {"task": derived dict} or {"error": message}, plus "seconds" (wall) and "cpu_s" (the
    child's CPU time, all threads) when known. Keys: file, ok, task | error, seconds, cpu_s.
    """
    line = {"file": path, "ok": "task" in outcome}
    line.update(outcome)
    return json.dumps(line)


def _seed_generators():
    random.seed(PROBLEM_RNG_SEED)
    import torch
    torch.manual_seed(PROBLEM_RNG_SEED)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(PROBLEM_RNG_SEED)


def _derive_here(path, options):
    """{"task": ...} or {"error": ...} for `path`, derived in this process (the child)."""
    from kforge_torch.derive import derive
    from kforge_torch.families import match_family
    from kforge_torch.problem_run import DeriveError
    if options.get("device") == "cuda":
        import torch
        if not torch.cuda.is_available():
            return {"error": f"{path}: --device cuda: no CUDA device is available here"}
    _seed_generators()
    try:
        return {"task": derive(path, options, match_family=match_family)}
    except DeriveError as error:
        return {"error": str(error)}
    except Exception as error:  # a fault of the derivation itself: the traceback helps fix it
        traceback.print_exc(file=sys.stderr)
        return {"error": f"{path}: the derivation failed: {type(error).__name__}: {error}"}


def _child(path, options, write_fd, close_fds):
    """Runs in the forked child: derives `path`, writes the outcome JSON to `write_fd`, exits
    without running the problem's atexit handlers or flushing its buffers twice. `close_fds`
    (the batch's results stream) are closed first, out of the problem's reach."""
    code = 0
    try:
        for fd in close_fds:
            os.close(fd)
        start_s, start_cpu_s = time.perf_counter(), time.process_time()
        outcome = _derive_here(path, options)
        outcome["seconds"] = round(time.perf_counter() - start_s, 4)
        outcome["cpu_s"] = round(time.process_time() - start_cpu_s, 4)
        data = json.dumps(outcome).encode()
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(data)
    except BaseException:  # noqa: B036 - the child must reach os._exit whatever happened
        traceback.print_exc(file=sys.stderr)
        code = 1
    finally:
        sys.stderr.flush()
        os._exit(code)


def _read_until(fd, deadline):
    """Bytes from `fd` until EOF, or None when `deadline` (time.monotonic) passes first."""
    chunks = []
    while True:
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            return None
        readable, _, _ = select.select([fd], [], [], left_s)
        if not readable:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _describe_status(status):
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"killed by {name}"
    return f"exit code {os.WEXITSTATUS(status)}"


def derive_in_child(path, options, time_limit_s, close_fds=()):
    """The outcome of deriving `path` in a forked child: {"task"} or {"error"}, with "seconds".

    A child still running after `time_limit_s` seconds is killed; one that dies without a result
    (a signal, a hard exit in the module) is reported with how it ended. The child closes the
    descriptors `close_fds` before it loads the problem.
    """
    read_fd, write_fd = os.pipe()
    start_s = time.perf_counter()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(path, options, write_fd, close_fds)
    os.close(write_fd)
    try:
        data = _read_until(read_fd, time.monotonic() + time_limit_s)
    finally:
        os.close(read_fd)
    if data is None:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    seconds = round(time.perf_counter() - start_s, 4)
    if data is None:
        return {"error": f"{path}: deriving the task did not finish in {time_limit_s:g} s (kforge "
                         "loads the module, builds it and runs forward at small sizes); stopped",
                "seconds": seconds}
    try:
        outcome = json.loads(data) if data else None
    except ValueError:
        outcome = None
    if not isinstance(outcome, dict) or not ("task" in outcome or "error" in outcome):
        return {"error": f"{path}: the derivation ended without a result "
                         f"({_describe_status(status)})", "seconds": seconds}
    return outcome


def run_batch(paths, options, time_limit_s, out):
    """Derives every file of `paths` in order, each in its own forked child, and writes one
    result_line per file to the text stream `out` (flushed after each). Returns 0.

    options: derive()'s options (device, capacity_check). The parent imports the derivation
    before the first fork, so the children share that import.
    """
    import kforge_torch.derive  # noqa: F401 - imported once here, shared by every child
    import kforge_torch.families  # noqa: F401
    preload()
    _note_threads()
    try:
        close_fds = [out.fileno()]
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (tests)
        close_fds = []
    for path in paths:
        absolute = os.path.abspath(path)
        outcome = derive_in_child(absolute, options, time_limit_s, close_fds=close_fds)
        out.write(result_line(absolute, outcome) + "\n")
        out.flush()
    return 0


# Operators whose first call on meta tensors makes torch import what it loads lazily.
_PRELOAD_OPS = (
    lambda torch, x: torch.relu(x),
    lambda torch, x: torch.softmax(x, dim=-1),
    lambda torch, x: x.sum(dim=-1),
    lambda torch, x: x @ x.transpose(-1, -2),
    lambda torch, x: torch.nn.functional.gelu(x),
    lambda torch, x: torch.cumsum(x, dim=-1),
)


def preload():
    """Imports in this (the parent) process what torch would import lazily in every child.

    PyTorch 2.x runs many operators on meta tensors through torch._refs, whose first call imports
    torch._dynamo (with sympy, triton and torch.distributed: about 880 modules, 4-5 s of every
    child's time on the H200 machine, measured with bench/torch/profile_derive.py); numpy.random
    is imported by the children's seeding. Meta tensors have no storage and run no kernel, so no
    thread pool starts here. Anything that fails is left to the children, where it is that
    problem's error.
    """
    import torch
    try:
        import numpy.random  # noqa: F401
    except ImportError:
        pass
    try:
        x = torch.empty(2, 3, device="meta")
    except (RuntimeError, TypeError):
        return
    for op in _PRELOAD_OPS:
        try:
            op(torch, x)
        except Exception:  # noqa: BLE001 - a warm-up only
            pass


def _note_threads():
    """Says on stderr when this process runs more than one thread before forking: a thread that
    holds a lock (malloc's, an OpenMP pool's) at the fork leaves it held in the child. Importing
    PyTorch 1.13 starts none (measured on the development machine); this shows it if a version
    does."""
    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError:
        return
    if threads > 1:
        print(f"kforge-torch: note: {threads} threads before forking the problems' children",
              file=sys.stderr)


def private_stdout():
    """A text stream on a copy of file descriptor 1, with descriptor 1 then pointed at stderr:
    the results keep stdout to themselves, whatever a problem prints (Python or C code)."""
    sys.stdout.flush()
    copy = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(copy, "w", encoding="utf-8")
