"""The `run` command of the candidate worker: a ModelNew's outputs for kforge's generated inputs,
with the checks a candidate that allocates its own outputs needs (candidate_guard.py).

Per call, in this order of verdicts: forward raises (runtime_error); the harness was tampered
with or a thread left running (rejected_by_policy); forward returned the wrong kind or size
(wrong_signature); an output shares storage with an input, a parameter or buffer, or an
earlier call's output (wrong_answer: a result returned by reference, or replayed from a cache).
Then, as kforge-worker reports them for the gate to judge: an input or parameter changed
(input_modified), an output changed after the call returned and the device was idle
(late_write). Whether the outputs are right is the orchestrator's to
judge, as for native candidates: they are written to output_path, call after call, and with
request.digest each call's digest (digest.py) is reported, so that a timed check that returns
the same outputs for the same inputs needs no read-back.

A run for profiling (request.nvtx_range, sent by kforge's NcuProfiler) opens an NVTX push/pop
range of that name around the last call's forward only: ncu, run with `--nvtx --nvtx-include
"<name>/"`, then counts the kernels forward launches and none of the harness's (input
generation and copies, parameter copies, checks) nor those of an earlier, warm-up call.
"""

import contextlib
import os
import time
import weakref

import torch
import torch.cuda.nvtx

from kforge_torch import inputs as kinputs
from kforge_torch.candidate import CandidateFailure, map_parameters
from kforge_torch.candidate_guard import find_alias, fresh_copy
from kforge_torch.digest import output_digest
from kforge_torch.protocol import ProtocolError, format_digest
from kforge_torch.reference import describe_exception
from kforge_torch.running import first_change, ms_since, new_run_result, write_call_outputs


# Taken before any candidate is imported: TamperWatch watches kforge_torch's functions, so a
# candidate that replaces these to leave the profiled range is caught like one that replaces the
# timers.
nvtx_range_push = torch.cuda.nvtx.range_push
nvtx_range_pop = torch.cuda.nvtx.range_pop


def nvtx_available():
    """Whether this PyTorch can open NVTX ranges: a CUDA build has torch._C._nvtx; in a
    CPU-only build the torch.cuda.nvtx functions raise."""
    return hasattr(torch._C, "_nvtx")


@contextlib.contextmanager
def profiled_range(name):
    """An NVTX push/pop range `name` (the default domain) around the block, which ncu selects
    with `--nvtx-include "<name>/"` (src/evaluation/profiler.h); nothing when `name` is ""."""
    if not name:
        yield
        return
    nvtx_range_push(name)
    try:
        yield
    finally:
        nvtx_range_pop()


class CallFailure(Exception):
    """A call of the candidate failed: the verdict and message of the reply."""

    def __init__(self, verdict, message):
        super().__init__(message)
        self.verdict = verdict


# Above this many bytes of inputs per call, a call's input copies and outputs are not held
# until the next call has returned (see hold_copies): at KernelBench 23 and 36 (6.4 and 7.5 GB a
# tensor) holding them doubled the worker's memory and ran an 80 GB card out of it beside the
# reference worker. kforge-worker stops rotating input sets at sizes like these too
# (EvaluationPolicy::rotation_limit_bytes): there the timed checks that write new values at a
# used address catch a replayed result. $KFORGE_CANDIDATE_HOLD_LIMIT_BYTES sets another limit
# (0: never hold; the corpus tests run both ways).
HOLD_LIMIT_BYTES = int(os.environ.get("KFORGE_CANDIDATE_HOLD_LIMIT_BYTES", "") or (1 << 30))


def hold_copies(sources):
    """Whether a call on `sources` ({signature index: tensor}) keeps its input copies and outputs
    alive until the next call of the candidate has returned (so that no two calls share an
    address): when the inputs come to at most HOLD_LIMIT_BYTES."""
    total = sum(t.numel() * t.element_size() for t in sources.values() if torch.is_tensor(t))
    return total <= HOLD_LIMIT_BYTES


def release_copies(session):
    """Lets go of what `session` holds from its last call: its input copies, and its outputs,
    which it keeps watching through weak references (an output the candidate itself keeps alive
    and returns again is still found as a replay)."""
    session.previous_inputs = {}
    session.earlier_weak = session.earlier_weak + [(label, weakref.ref(t))
                                                   for label, t in session.earlier_outputs]
    session.earlier_outputs = []


def earlier_outputs(session):
    """[(label, tensor)] of the outputs of the session's earlier calls that are still alive:
    those it holds, and those it let go of that someone (the candidate) still holds."""
    watched, alive = [], []
    for label, ref in session.earlier_weak:
        tensor = ref()
        if tensor is not None:
            watched.append((label, ref))
            alive.append((label, tensor))
    session.earlier_weak = watched
    return session.earlier_outputs + alive


def prepare(session, request, plan, with_inputs=True):
    """(model, held, values) for a request: ModelNew at the request's workload and seed, its
    tensors matched to the signature (held), and the generated (or provided) inputs (values;
    None unless `with_inputs`: the timing makes its own sets). CallFailure for the candidate's
    failures."""
    task = session.candidate.task
    task.provided_dir = getattr(request, "provided_dir", "")
    try:
        model = session.candidate.build(request.workload.name, request.seed,
                                        session.device.torch_device)
        held = map_parameters(model, plan)
    except CandidateFailure as e:
        raise CallFailure(e.verdict, str(e))
    except Exception as e:
        if not is_out_of_memory(e):
            raise
        raise out_of_memory_failure("building ModelNew", e)
    if not with_inputs:
        return model, held, None
    try:
        values = task.generate_inputs(plan, request.seed, request.distribution,
                                      session.device.torch_device,
                                      host=getattr(request, "host_inputs", False),
                                      workload_name=request.workload.name)
    except Exception as e:
        if not is_out_of_memory(e):
            raise
        raise out_of_memory_failure("making the inputs", e)
    return model, held, values


def is_out_of_memory(error):
    """Whether `error` is PyTorch's out-of-memory error (torch.cuda.OutOfMemoryError, which
    PyTorch 1.13 and 2.x raise; older releases raised a RuntimeError saying so)."""
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(error, oom):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error)


def out_of_memory_failure(doing, error):
    """The candidate's runtime_error for device memory that ran out while the worker was
    `doing` something for it (not in its forward): the run goes on with the next candidate.
    The device's cache is released so that the next one starts from what is free."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return CallFailure("runtime_error", "out of device memory while %s for this candidate (the "
                       "task's inputs, the copies the harness holds so that no two calls share "
                       "an address, and the other workers on the device do not fit): %s"
                       % (doing, describe_exception(error)))


def owners_of(plan, passed, model):
    """[(name, tensor)] an output must not share storage with: the call's inputs and every
    parameter and buffer of the model."""
    owners = [("input '%s'" % plan[i].spec.name, t) for i, t in passed.items()
              if plan[i].source == "input"]
    owners += [("parameter '%s'" % n, t) for n, t in model.named_parameters()]
    owners += [("buffer '%s'" % n, t) for n, t in model.named_buffers()]
    return owners


def call_once(session, plan, model, held, sources, workload_name, seed, nvtx_range=""):
    """One call on the inputs `sources` ({signature index: tensor}): parameters set to their
    values, the other inputs copied into new storage (fresh_copy; the previous call's copies are
    held until this one returns), forward under no_grad (inside the NVTX range `nvtx_range`
    when it is not "": forward alone, profiled_range), then the tamper, output and alias checks.
    Returns (pairs, passed, call_ms); pairs = [(signature index, output)], passed = what
    forward received by signature index. CallFailure for a failed check."""
    task = session.candidate.task
    device = session.device
    hold = hold_copies(sources)
    if not hold:
        release_copies(session)
    try:
        with torch.no_grad():
            for i, tensor in held.items():
                tensor.copy_(sources[i])
            passed = {i: fresh_copy(sources[i]) for i in sources if i not in held}
            passed.update(held)
            args = task.forward_args(plan, passed, workload_name, seed)
            device.synchronize()
            with profiled_range(nvtx_range):
                start = time.perf_counter()
                returned = model(*args)
            device.synchronize()
            call_ms = ms_since(start)
    except Exception as e:
        raise CallFailure("runtime_error", "forward raised " + describe_exception(e))
    tampered = session.watch.violation()
    if tampered:
        raise CallFailure("rejected_by_policy", "the candidate changed the harness: " + tampered)
    pairs, problem = task.outputs(plan, returned)
    if pairs is None:
        raise CallFailure("wrong_signature", problem)
    owners = owners_of(plan, passed, model) + earlier_outputs(session)
    for i, output in pairs:
        alias = find_alias(output, owners)
        if alias:
            raise CallFailure("wrong_answer", "output '%s' shares storage with %s: ModelNew must "
                              "return new tensors it computed, not an input, a parameter or a "
                              "result kept from an earlier call" % (plan[i].spec.name, alias))
    # Held until the next call has returned: an output that reappears there was replayed, and
    # the next inputs cannot take these inputs' addresses.
    # Past HOLD_LIMIT_BYTES the outputs are watched through weak references only, and the
    # caller drops its references before the next call (hold_copies).
    session.earlier_outputs = [("the output of an earlier call", t) for _, t in pairs]
    session.previous_inputs = passed
    if not hold:
        release_copies(session)
    return pairs, passed, call_ms


def call_digest(plan, pairs):
    """The digest (digest.output_digest) of one call's outputs `pairs` ([(signature index,
    tensor)]), each in its signature dtype."""
    return output_digest([t for _, t in pairs],
                         [kinputs.TORCH_DTYPES[plan[i].spec.dtype] for i, _ in pairs])


def modified_input(plan, sources, passed):
    """"" or "'x' at [i, j]" for the first input or parameter whose bits differ from the
    values it was given."""
    for i in sorted(passed):
        changed = first_change(plan[i].spec.name, plan[i].shape, sources[i], passed[i])
        if changed:
            return changed
    return ""


def late_change(pairs, plan, snapshots, wait_ms, device):
    """"" or "'y' at [i]" for the first output that differs from its snapshot after `wait_ms`."""
    if wait_ms > 0:
        time.sleep(wait_ms / 1e3)
    device.synchronize()
    for (i, output), before in zip(pairs, snapshots):
        changed = first_change(plan[i].spec.name, plan[i].shape, before, output)
        if changed:
            return changed
    return ""


def run_candidate(session, request):
    """Answers a RunRequest for the session's candidate; returns a RunResult dict (verdicts
    above). With request.nvtx_range (getattr: "" when absent) the last call's forward runs in
    that NVTX range. Raises ProtocolError for a malformed request, a task/signature mismatch,
    or an NVTX range this PyTorch cannot open."""
    if request.calls not in (1, 2):
        raise ProtocolError("run request needs calls = 1 or 2")
    nvtx_range = getattr(request, "nvtx_range", "")
    if nvtx_range and not nvtx_available():
        raise ProtocolError("nvtx_range '%s': this PyTorch has no NVTX (a CPU-only build); "
                            "profiling a candidate needs a CUDA build" % nvtx_range)
    if not os.path.isfile(request.output_path):
        raise ProtocolError("output file %s does not exist (the orchestrator creates it)"
                            % request.output_path)
    if request.padded or request.remap != "none":
        raise ProtocolError("the candidate worker takes no padded or remapped inputs (a "
                            "ModelNew receives the module's own contiguous tensors)")
    task = session.candidate.task
    plan = task.plan(request.signature, request.workload)
    result = new_run_result()
    result["digests"] = []
    result["output_bytes"] = sum(e.numel * kinputs.ELEMENT_BYTES[e.spec.dtype]
                                 for e in plan if e.source == "output")
    start = time.perf_counter()
    try:
        model, held, values = prepare(session, request, plan)
    except CallFailure as e:
        result.update(verdict=e.verdict, message=str(e))
        return result
    session.device.synchronize()
    result["input_ms"] = ms_since(start)
    with open(request.output_path, "r+b") as out:
        out.truncate(0)
        for call in range(request.calls):
            prefix = "call %d: " % (call + 1) if request.calls > 1 else ""
            try:
                profiled = nvtx_range if call == request.calls - 1 else ""
                pairs, passed, call_ms = call_once(session, plan, model, held, values,
                                                   request.workload.name, request.seed,
                                                   profiled)
            except CallFailure as e:
                result.update(verdict=e.verdict, message=prefix + str(e))
                return result
            result["call_ms"].append(call_ms)
            check_start = time.perf_counter()
            if not result["input_modified"]:
                result["input_modified"] = modified_input(plan, values, passed)
            if request.late_write_wait_ms > 0 and not result["late_write"]:
                snapshots = [output.detach().clone() for _, output in pairs]
                result["late_write"] = late_change(pairs, plan, snapshots,
                                                   request.late_write_wait_ms, session.device)
                del snapshots
            if getattr(request, "digest", False) and not result["late_write"]:
                result["digests"].append(format_digest(call_digest(plan, pairs)))
            result["check_ms"] += ms_since(check_start)
            write_call_outputs(pairs, plan, out, result)
            del pairs, passed  # what the next call may reuse (hold_copies)
    return result
