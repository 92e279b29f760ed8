"""The `time` command of the reference worker: timing of forward as PyTorch eager runs it, or of
its torch.compile form (baseline "compile", compiled.py), with the measurement policy, cache
flush and reply fields of the native worker (kernel_runner.cpp)."""

import json
import math
import statistics
import time
import types

import torch

from kforge_torch.compiled import CompileFailure, compile_entry, compiled_entry
from kforge_torch.protocol import ProtocolError
from kforge_torch.reference import describe_exception
from kforge_torch.running import ms_since


def median_relative_half_width(ordered):
    """Half the width of the 95% confidence interval of the median (order-statistic ranks) over
    the median, for ascending samples `ordered`; inf below 5 samples or for a median <= 0.
    The same arithmetic as kernel_runner.cpp."""
    n = len(ordered)
    if n < 5:
        return math.inf
    spread = 1.96 * math.sqrt(n) / 2.0
    low = int(max(0.0, math.floor(n / 2.0 - spread)))
    high = min(n - 1, int(math.ceil(n / 2.0 + spread)))
    median = ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])
    if not median > 0:
        return math.inf
    return 0.5 * (ordered[high] - ordered[low]) / median


def new_timing_cache():
    """Where run_time keeps the input sets of its last request (key, sets) for reuse."""
    return types.SimpleNamespace(key=None, sets=None)


def new_time_result():
    """A TimeResult of protocol.h with its defaults."""
    return {"verdict": "ok", "message": "", "samples_ms": [], "host_ms": [], "sm_clock_mhz": [],
            "throttled": [], "overhead_ms": 0.0, "input_sets_used": 0, "inputs_reused": False,
            "setup_ms": 0.0, "checked": [], "stop_reason": "", "host_wall_ms": 0.0,
            "warmup_ms": [], "check_ms": 0.0, "compile_ms": 0.0, "compile_reused": False,
            "compile_unsupported": False}


def _validate(request):
    policy = request.policy
    if (policy.min_repetitions < 1 or policy.max_repetitions < policy.min_repetitions
            or policy.warmup < 0 or not policy.max_seconds > 0 or request.input_sets < 1):
        raise ProtocolError("time request needs 1 <= min_repetitions <= max_repetitions, "
                            "warmup >= 0, max_seconds > 0 and input_sets >= 1")


def _make_sets(task, device, request, plan):
    """Input sets for seeds seed, seed+1, ...: as many as asked while each new one fits twice in
    free memory (at least one). Each set: {signature index: tensor}."""
    name = request.workload.name
    sets = [task.generate_inputs(plan, request.seed, request.distribution, device.torch_device,
                                 workload_name=name)]
    set_bytes = sum(t.numel() * t.element_size() for t in sets[0].values())
    while len(sets) < request.input_sets and set_bytes * 2 < device.free_memory_bytes():
        sets.append(task.generate_inputs(plan, request.seed + len(sets), request.distribution,
                                         device.torch_device, workload_name=name))
    return sets


def run_time(task, device, request, cache, compiled):
    """Answers a TimeRequest for ReferenceTask `task` on Device `device`; returns a TimeResult
    dict. Forward runs in the inputs' own dtype under torch.no_grad(). Timed call i uses input
    set i % sets (forward arguments only: parameters and buffers keep set 0's values). Checked
    calls are never asked of the trusted reference: a request with checks is refused.

    With request.baseline "compile", the calls go to torch.compile of the module, compiled at
    the first such request for this task and workload and kept in `compiled`
    (new_compiled_cache()): compile_ms is its compile time (the first call's wall time; outside
    the samples, the warm-up and the request's max_seconds), compile_reused says an earlier
    request paid it. A compile that fails is runtime_error naming the problem and why, with
    compile_unsupported when this PyTorch cannot compile at all.

    Raises ProtocolError for a malformed request; a failure of the module is runtime_error.
    """
    _validate(request)
    if request.checks:
        raise ProtocolError("the reference worker does not run checked calls (checks given)")
    policy = request.policy
    plan = task.plan(request.signature, request.workload)
    result = new_time_result()

    def fail(message):
        result.update(verdict="runtime_error", message=message, samples_ms=[], host_ms=[])
        return result

    start = time.perf_counter()
    entry = None
    try:
        if request.baseline == "compile":
            entry = compiled_entry(compiled, task, request.workload.name, request.seed, device)
            model = entry.model
        else:
            model = task.model(request.workload.name, request.seed, False, device.torch_device)
    except Exception as e:
        return fail("building the model: " + describe_exception(e))
    key = json.dumps([id(task), request.workload.name, request.workload.dims, request.seed,
                      request.distribution, request.input_sets,
                      [(t.name, t.dtype, t.shape) for t in request.signature.tensors]])
    sets = None
    if cache.key == key and cache.sets:
        sets, result["inputs_reused"] = cache.sets, True
    cache.key, cache.sets = None, None  # frees another key's memory before allocating
    if sets is None:
        try:
            sets = _make_sets(task, device, request, plan)
        except ProtocolError:
            raise
        except Exception as e:  # get_inputs() of a provided input: the module's own code
            return fail("making the provided inputs: " + describe_exception(e))
    result["input_sets_used"] = len(sets)
    held = task.module_tensors(model, plan)
    with torch.no_grad():
        for i, tensor in held.items():
            tensor.copy_(sets[0][i])
    arg_sets = [task.forward_args(plan, s, request.workload.name, request.seed + k)
                for k, s in enumerate(sets)]
    device.synchronize()
    result["setup_ms"] = ms_since(start)
    forward = model
    if entry is not None:
        try:
            result["compile_reused"] = compile_entry(entry, arg_sets[0], device)
        except CompileFailure as e:
            result["compile_unsupported"] = e.unsupported
            return fail(str(e))
        forward = entry.forward
        result["compile_ms"] = entry.compile_ms
        if not result["compile_reused"]:
            start += entry.compile_ms / 1e3  # the compile does not spend max_seconds

    # The cost of the timing bracket itself: host minus device time with nothing inside.
    overhead = []
    for _ in range(5):
        host_start = time.perf_counter()
        mark = device.start_timer()
        device_ms = device.stop_timer_ms(mark)
        device.synchronize()
        overhead.append(ms_since(host_start) - device_ms)
    result["overhead_ms"] = statistics.median(overhead)

    with torch.no_grad():
        for i in range(policy.warmup):
            if ms_since(start) >= policy.max_seconds * 1000.0:
                break
            try:
                forward(*arg_sets[i % len(arg_sets)])
                device.synchronize()
            except Exception as e:
                return fail("warm-up call %d: forward raised %s" % (i, describe_exception(e)))
        timed_start = time.perf_counter()
        ordered = []
        for i in range(policy.max_repetitions):
            args = arg_sets[i % len(arg_sets)]
            device.synchronize()  # the device is idle: nothing earlier is in the host time
            host_start = time.perf_counter()
            # The flush is enqueued, not waited for: forward's launches overlap it instead of
            # being timed; its own time is taken out of the host time below.
            flush_mark = device.start_timer() if request.flush_l2 else None
            if request.flush_l2:
                device.flush_cache()
            mark = device.start_timer()
            try:
                forward(*args)
                sample_ms = device.stop_timer_ms(mark)
                device.synchronize()
            except Exception as e:
                return fail("timed call %d: forward raised %s" % (i, describe_exception(e)))
            host_ms = ms_since(host_start)
            if flush_mark is not None:
                host_ms -= device.between_ms(flush_mark, mark)
            result["samples_ms"].append(sample_ms)
            result["host_ms"].append(host_ms)
            ordered.append(sample_ms)
            ordered.sort()
            if (i + 1 >= policy.min_repetitions
                    and median_relative_half_width(ordered) <= policy.target_relative_noise):
                result["stop_reason"] = "noise"
                break
            # The limit cuts samples short only before the last one asked for.
            if (ms_since(start) >= policy.max_seconds * 1000.0
                    and policy.min_repetitions <= i + 1 < policy.max_repetitions):
                result["stop_reason"] = "max_seconds"
                break
    if not result["stop_reason"]:
        result["stop_reason"] = "max_repetitions"
    result["host_wall_ms"] = ms_since(timed_start)
    cache.key, cache.sets = key, sets
    return result
