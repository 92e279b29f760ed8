"""The torch.compile baseline of the reference worker: the module compiled once per loaded task
and workload, its compile time (the first call's wall time) kept apart from any timing sample.

`python3 -m kforge_torch compile-support` prints compile_support() as JSON, so that the
orchestrator can refuse `--baseline compile` up front where this PyTorch cannot compile at all.
"""

import json
import sys
import time
import types

import torch

from kforge_torch.reference import describe_exception


class CompileFailure(Exception):
    """torch.compile cannot give a compiled module: `unsupported` when this PyTorch cannot
    compile anything (no torch.compile, or Dynamo not supported on this Python), else this
    module failed to compile or its compiled form raised on the first call."""

    def __init__(self, message, unsupported=False):
        super().__init__(message)
        self.unsupported = unsupported


def compile_support():
    """"" when torch.compile can be used with this PyTorch and Python, else one sentence saying
    why not (PyTorch 1.x has no torch.compile; PyTorch 2.0 and 2.1 refuse Python 3.12)."""
    if not hasattr(torch, "compile"):
        return ("PyTorch %s has no torch.compile (it came with PyTorch 2.0); this Python is %s"
                % (torch.__version__, sys.executable))
    try:
        from torch._dynamo import eval_frame
    except Exception as e:  # a broken install: say what failed to import
        return "PyTorch %s: torch._dynamo does not import: %s" % (
            torch.__version__, describe_exception(e))
    check = getattr(eval_frame, "check_if_dynamo_supported", None)
    if check is not None:
        try:
            check()
        except Exception as e:
            return "PyTorch %s: torch.compile is not supported here: %s" % (torch.__version__, e)
        return ""
    supported = getattr(eval_frame, "is_dynamo_supported", None)
    if supported is not None and not supported():
        return "PyTorch %s: torch.compile is not supported on Python %d.%d" % (
            torch.__version__, sys.version_info[0], sys.version_info[1])
    return ""


def new_compiled_cache():
    """Where the compiled modules live: {(task id, workload name, seed): entry}."""
    return {}


def compiled_entry(cache, task, workload_name, seed, device):
    """The compile baseline's own model for (task, workload_name, seed): `Model(*get_init_inputs())`
    built under torch.manual_seed(seed) on `device`, in the inputs' dtype, apart from the eager
    model (ReferenceTask.model keeps one model and rebuilds it for float64 runs; a compiled
    module tied to it would be compiled again after every run request). Built at the first
    request and kept while the worker lives. Returns the entry (model, forward: the compiled
    callable or None before compile(), compile_ms, failure). Exceptions of the module's
    constructor propagate."""
    key = (id(task), workload_name, seed)
    if key not in cache:
        model = task.build_model(workload_name, seed, False, device.torch_device)
        cache[key] = types.SimpleNamespace(model=model, forward=None, compile_ms=0.0,
                                           failure=None, problem=task.problem,
                                           workload=workload_name)
    return cache[key]


def compile_entry(entry, first_args, device):
    """Compiles entry.model with torch.compile unless done: returns True when an earlier request
    compiled it (reused), False when this call did. compile_ms is the wall time of torch.compile
    plus the first call on `first_args` (under torch.no_grad(), then a device-wide synchronize):
    tracing, code generation and autotuning happen there, and so does that call's own run, so it
    is never a timing sample.

    Raises CompileFailure naming the problem and why. A failure is kept in the entry, so that a
    later request for the same task and workload fails at once instead of compiling again.
    """
    if entry.failure is not None:
        raise entry.failure
    if entry.forward is not None:
        return True
    why_not = compile_support()
    if why_not:
        entry.failure = CompileFailure("torch.compile of %s is not possible: %s"
                                       % (entry.problem, why_not), unsupported=True)
        raise entry.failure
    start = time.perf_counter()
    try:
        forward = torch.compile(entry.model)
        with torch.no_grad():
            forward(*first_args)
        device.synchronize()
    except Exception as e:
        entry.failure = CompileFailure("torch.compile of %s (workload '%s') failed: %s"
                                       % (entry.problem, entry.workload, describe_exception(e)))
        raise entry.failure
    entry.compile_ms = (time.perf_counter() - start) * 1e3
    entry.forward = forward
    return False


def main():
    """`compile-support`: prints {"torch": version, "available": bool, "why": text}; exit 0."""
    why = compile_support()
    sys.stdout.write(json.dumps({"torch": torch.__version__, "available": not why,
                                 "why": why}) + "\n")
    return 0
