"""The `time` command of the candidate worker: a ModelNew timed with the measurement policy,
cache flush, rotated input sets and reply fields of the reference worker (timing.py) and of
kforge-worker, plus the checked calls of TimeRequest.checks (src/worker/protocol.h).

Every warm-up and timed call gets its inputs in new storage, copied outside the timed region
from its rotated set (candidate_guard.fresh_copy); parameters and buffers get the set's values
copied in too (unlike the reference's timing, which keeps set 0's: a checked call's outputs are
compared with the reference's for all of that set's values).
A checked call runs on the set's own values, or with `overwrite` on new values of (seed,
distribution), and its outputs go to "<check_path>.<k>" for the orchestrator to compare
unless their digest (taken on the device, digest.py) is one the orchestrator verified for those
inputs or an earlier check's of the request (record_check);
around it the worker checks what candidate_run checks around a gate call (tamper, aliasing,
unchanged inputs and parameters). Every timed call's outputs are checked for aliasing.
"""

import json
import statistics
import time
import types

from kforge_torch import inputs as kinputs
from kforge_torch.candidate_run import (CallFailure, call_digest, call_once, is_out_of_memory,
                                        modified_input, out_of_memory_failure, prepare)
from kforge_torch.protocol import ProtocolError, DISTRIBUTIONS, format_digest
from kforge_torch.running import ms_since
from kforge_torch.timing import (_make_sets, _validate, median_relative_half_width,
                                 new_time_result)


def parse_checks(request):
    """[namespace(call, overwrite, seed, distribution)] of request.checks, validated as
    kforge-worker validates them. ProtocolError for a malformed check."""
    checks = []
    for j in request.checks:
        if not isinstance(j, dict) or not isinstance(j.get("call"), int):
            raise ProtocolError("a timed check needs an integer 'call'")
        distribution = j.get("distribution", "uniform")
        if distribution not in DISTRIBUTIONS:
            raise ProtocolError("timed check: unknown input distribution '%s'" % distribution)
        check = types.SimpleNamespace(call=j["call"], overwrite=bool(j.get("overwrite", False)),
                                      seed=int(j.get("seed", 0)) & 0xFFFFFFFFFFFFFFFF,
                                      distribution=distribution)
        if not 0 <= check.call < request.policy.min_repetitions:
            raise ProtocolError("timed check at call %d: checks must be below min_repetitions "
                                "(%d)" % (check.call, request.policy.min_repetitions))
        checks.append(check)
    if checks and not request.check_path:
        raise ProtocolError("timed checks need a check_path")
    if len({c.call for c in checks}) != len(checks):
        raise ProtocolError("timed checks must name distinct calls")
    return checks


def write_check(path, plan, pairs):
    """Writes the outputs `pairs` (signature order, signature dtypes) to `path`, a device tensor
    through one pinned chunk at a time (inputs.write_raw)."""
    with open(path, "r+b") as out:
        out.truncate(0)
        for i, tensor in pairs:
            cast = tensor.detach().to(kinputs.TORCH_DTYPES[plan[i].spec.dtype]).contiguous()
            kinputs.write_raw(cast, out)


def run_candidate_time(session, request, cache):
    """Answers a TimeRequest for the session's candidate; returns a TimeResult dict. Verdicts:
    runtime_error (forward raised), rejected_by_policy (the harness changed, a thread left
    running), wrong_signature (forward returned the wrong kind or size), wrong_answer (an output
    aliases an input, a parameter or an earlier output; an input or parameter was written).
    Wrong values at checked calls are the orchestrator's to find. ProtocolError for a malformed
    request; `cache` (timing.new_timing_cache()) keeps the last request's input sets."""
    _validate(request)
    if request.baseline != "eager":
        raise ProtocolError("the candidate worker times candidates only (baseline '%s')"
                            % request.baseline)
    checks = {c.call: (k, c) for k, c in enumerate(parse_checks(request))}
    policy = request.policy
    task = session.candidate.task
    plan = task.plan(request.signature, request.workload)
    result = new_time_result()

    def fail(verdict, message):
        result.update(verdict=verdict, message=message, samples_ms=[], host_ms=[])
        return result

    start = time.perf_counter()
    try:
        model, held, _ = prepare(session, request, plan, with_inputs=False)
    except CallFailure as e:
        return fail(e.verdict, str(e))
    key = json.dumps([id(session.candidate), request.workload.name, request.workload.dims,
                      request.seed, request.distribution, request.input_sets,
                      [(t.name, t.dtype, t.shape) for t in request.signature.tensors]])
    sets = None
    if cache.key == key and cache.sets:
        sets, result["inputs_reused"] = cache.sets, True
    cache.key, cache.sets = None, None
    if sets is None:
        try:
            sets = _make_sets(task, session.device, request, plan)
        except Exception as e:
            if not is_out_of_memory(e):
                raise
            return fail("runtime_error", str(out_of_memory_failure("making the input sets", e)))
    result["input_sets_used"] = len(sets)
    session.device.synchronize()
    result["setup_ms"] = ms_since(start)

    overhead = []
    device = session.device
    for _ in range(5):
        host_start = time.perf_counter()
        mark = device.start_timer()
        device_ms = device.stop_timer_ms(mark)
        device.synchronize()
        overhead.append(ms_since(host_start) - device_ms)
    result["overhead_ms"] = statistics.median(overhead)

    name, seed = request.workload.name, request.seed
    for i in range(policy.warmup):
        if ms_since(start) >= policy.max_seconds * 1000.0:
            break
        warm_start = time.perf_counter()
        try:
            call_once(session, plan, model, held, sets[i % len(sets)], name, seed)
        except CallFailure as e:
            return fail(e.verdict, "warm-up call %d: %s" % (i, e))
        result["warmup_ms"].append(ms_since(warm_start))

    timed_start = time.perf_counter()
    ordered = []
    for i in range(policy.max_repetitions):
        set_index = i % len(sets)
        sources = sets[set_index]
        check = checks.get(i)
        if check is not None and check[1].overwrite:
            sources = task.generate_inputs(plan, check[1].seed, check[1].distribution,
                                           device.torch_device, workload_name=name)
        try:
            pairs, passed, sample_ms, host_ms = timed_call(session, plan, model, held, sources,
                                                           name, seed + set_index, request)
        except CallFailure as e:
            return fail(e.verdict, "timed call %d: %s" % (i, e))
        result["samples_ms"].append(sample_ms)
        result["host_ms"].append(host_ms)
        if check is not None:
            failure = record_check(result, request, plan, check, pairs, passed, sources,
                                   seed + set_index, i)
            if failure:
                return fail("wrong_answer", "timed call %d: %s" % (i, failure))
        del pairs, passed, sources  # what the next call may reuse (candidate_run.hold_copies)
        ordered.append(sample_ms)
        ordered.sort()
        if i + 1 >= policy.min_repetitions:  # checks are all below min_repetitions
            if median_relative_half_width(ordered) <= policy.target_relative_noise:
                result["stop_reason"] = "noise"
                break
            # The limit cuts samples short only before the last one asked for.
            if (ms_since(start) >= policy.max_seconds * 1000.0
                    and i + 1 < policy.max_repetitions):
                result["stop_reason"] = "max_seconds"
                break
    if not result["stop_reason"]:
        result["stop_reason"] = "max_repetitions"
    result["host_wall_ms"] = ms_since(timed_start)
    tampered = session.watch.violation()
    if tampered:
        return fail("rejected_by_policy", "the candidate changed the harness: " + tampered)
    cache.key, cache.sets = key, sets
    return result


def timed_call(session, plan, model, held, sources, workload_name, seed, request):
    """One timed call: fresh inputs, then (outside the timed region) the L2 flush, then forward
    between device timer marks. Returns (pairs, passed, sample_ms, host_ms); host_ms is the
    host wall time of the call plus a device-wide synchronize, without the flush."""
    device = session.device
    timing = {}

    def forward(*args):
        host_start = time.perf_counter()
        flush_mark = device.start_timer() if request.flush_l2 else None
        if request.flush_l2:
            device.flush_cache()
        mark = device.start_timer()
        returned = model(*args)
        timing["sample_ms"] = device.stop_timer_ms(mark)
        device.synchronize()
        host_ms = ms_since(host_start)
        if flush_mark is not None:
            host_ms -= device.between_ms(flush_mark, mark)
        timing["host_ms"] = host_ms
        return returned

    pairs, passed, _ = call_once(session, plan, _Forward(model, forward), held, sources,
                                 workload_name, seed)
    return pairs, passed, timing["sample_ms"], timing["host_ms"]


class _Forward:
    """Calls `forward` in place of `model`, and lends the model's named_parameters/buffers to
    the alias check."""

    def __init__(self, model, forward):
        self._model = model
        self._forward = forward

    def __call__(self, *args):
        return self._forward(*args)

    def named_parameters(self):
        return self._model.named_parameters()

    def named_buffers(self):
        return self._model.named_buffers()


def record_check(result, request, plan, check, pairs, passed, sources, set_seed, call):
    """Records checked call `call` in result["checked"] (a CheckedCall of protocol.h) and
    returns "" or what the unchanged-input check found. The outputs' digest (digest.py) is
    taken on the device; they are written to the check's file only when the digest is neither
    one the orchestrator verified for these inputs (request.verified) nor an earlier checked
    call's of this request on the same inputs (then `same_as` names it), as kforge-worker does
    (kernel_runner.cpp)."""
    k, spec = check
    check_start = time.perf_counter()
    changed = modified_input(plan, sources, passed)
    if changed:
        return "input %s was modified (ModelNew must not write its inputs or parameters)" \
            % changed
    seed = spec.seed if spec.overwrite else set_seed
    distribution = spec.distribution if spec.overwrite else request.distribution
    digest = call_digest(plan, pairs)
    text = format_digest(digest)
    same_as = -1
    for earlier in result["checked"]:
        if (earlier["seed"], earlier["distribution"], earlier["digest"]) == \
                (seed, distribution, text):
            same_as = earlier["same_as"] if earlier["same_as"] >= 0 else earlier["call"]
    verified = (seed, distribution, digest) in getattr(request, "verified", [])
    offset = -1
    if not verified and same_as < 0:
        write_check("%s.%d" % (request.check_path, k), plan, pairs)
        offset = 0
    result["checked"].append({
        "call": call, "seed": seed, "distribution": distribution,
        "digest": text, "offset": offset, "same_as": same_as})
    result["check_ms"] += ms_since(check_start)
    return ""
