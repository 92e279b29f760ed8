"""The `run` command of the reference worker: the module's outputs for generated inputs."""

import contextlib
import os
import time

import torch

from kforge_torch import inputs as kinputs
from kforge_torch.protocol import ProtocolError, format_index
from kforge_torch.reference import describe_exception


def ms_since(start):
    """Milliseconds since perf_counter() value `start`."""
    return (time.perf_counter() - start) * 1e3


def first_change(name, shape, before, after):
    """"'name' at [i, j]" for the first element whose bits differ between `before` and
    `after` (same dtype and element count), or "" when they are bitwise equal. `shape` is the
    signature's shape the index is written in."""
    # A parameter may hold the values in its own dtype: compare in the generated one.
    a = kinputs.bit_view(before.detach().reshape(-1))
    b = kinputs.bit_view(after.detach().to(before.dtype).reshape(-1))
    differs = (a != b).nonzero()
    if differs.numel() == 0:
        return ""
    return "'%s' at %s" % (name, format_index(int(differs[0, 0]), shape))


def write_call_outputs(pairs, plan, out, result):
    """Writes one call's outputs ([(signature index, tensor)]) to the open file `out`, each in
    its signature dtype, in signature order; adds the time to result["output_ms"] and counts the
    call in result["calls_completed"]."""
    output_start = time.perf_counter()
    for i, tensor in pairs:
        cast = tensor.detach().to(kinputs.TORCH_DTYPES[plan[i].spec.dtype])
        kinputs.write_raw(cast, out)
    result["output_ms"] += ms_since(output_start)
    result["calls_completed"] += 1


@contextlib.contextmanager
def fp32_arithmetic(enabled):
    """While `enabled`: matmuls and cuDNN convolutions in plain fp32, not TF32 (PyTorch lets
    cuDNN use TF32 for fp32 convolutions by default, and a user's process may allow it for
    matmuls). The previous settings come back afterwards."""
    if not enabled:
        yield
        return
    matmul = torch.backends.cuda.matmul.allow_tf32
    cudnn = torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul
        torch.backends.cudnn.allow_tf32 = cudnn


def new_run_result():
    """A RunResult of protocol.h with its defaults."""
    return {"verdict": "ok", "message": "", "calls_completed": 0, "output_bytes": 0,
            "input_modified": "", "late_write": "", "call_ms": [], "input_ms": 0.0,
            "output_ms": 0.0, "check_ms": 0.0}


def run_outputs(task, device, request):
    """Answers a RunRequest for ReferenceTask `task` on Device `device`; returns a RunResult
    dict. Forward runs `request.calls` times on fresh copies of the inputs (float64 when the
    task has double_reference); each call's outputs, cast to the signature's dtypes, are written
    to request.output_path (truncated first, as the native worker does), call after call.

    Raises ProtocolError for a malformed request or a task/signature mismatch; a failure of the
    module itself is verdict runtime_error.
    """
    if request.calls not in (1, 2):
        raise ProtocolError("run request needs calls = 1 or 2")
    if not request.output_path:
        raise ProtocolError("run request needs an output_path")
    if not os.path.isfile(request.output_path):
        raise ProtocolError("output file %s does not exist (the orchestrator creates it)"
                            % request.output_path)
    plan = task.plan(request.signature, request.workload)
    result = new_run_result()
    result["output_bytes"] = sum(e.numel * kinputs.ELEMENT_BYTES[e.spec.dtype]
                                 for e in plan if e.source == "output")
    double = task.double_reference

    def fail(message):
        result["verdict"] = "runtime_error"
        result["message"] = message
        return result

    start = time.perf_counter()
    try:
        model = task.model(request.workload.name, request.seed, double, device.torch_device)
    except Exception as e:  # the module's own code: a verdict, not a harness error
        return fail("building the model: " + describe_exception(e))
    try:
        values = task.generate_inputs(plan, request.seed, request.distribution,
                                      device.torch_device, host=request.host_inputs,
                                      remap=request.remap, workload_name=request.workload.name)
    except ProtocolError:
        raise
    except Exception as e:  # get_inputs() of a provided input: the module's own code
        return fail("making the provided inputs: " + describe_exception(e))
    if double:
        # Upcast after generation, so the values are those of the inputs' own dtype.
        values = {i: (v.double() if v.is_floating_point() else v) for i, v in values.items()}
    held = task.module_tensors(model, plan)
    device.synchronize()
    result["input_ms"] = ms_since(start)

    with open(request.output_path, "r+b") as out:
        out.truncate(0)
        for call in range(request.calls):
            prefix = "call %d: " % (call + 1) if request.calls > 1 else ""
            try:
                with torch.no_grad():
                    # Fresh copies each call: parameters restored, arguments cloned.
                    for i, tensor in held.items():
                        tensor.copy_(values[i])
                    passed = {i: values[i].clone() for i in values if i not in held}
                    passed.update(held)
                    args = task.forward_args(plan, passed, request.workload.name, request.seed)
                    device.synchronize()
                    call_start = time.perf_counter()
                    with fp32_arithmetic(task.fp32_model):
                        returned = model(*args)
                    device.synchronize()
                    call_ms = ms_since(call_start)
            except Exception as e:
                return fail(prefix + "forward raised " + describe_exception(e))
            pairs, problem = task.outputs(plan, returned)
            if pairs is None:
                return fail(prefix + problem)
            result["call_ms"].append(call_ms)

            check_start = time.perf_counter()
            # Forward's arguments are clones: a module that works in place on its input (ReLU
            # with inplace=True) changes only its copy, and the next call gets a fresh one. The
            # module's own parameters and buffers are what must stay unchanged.
            for i in sorted(held):
                if result["input_modified"]:
                    break
                result["input_modified"] = first_change(plan[i].spec.name, plan[i].shape,
                                                        values[i], passed[i])
            result["check_ms"] += ms_since(check_start)

            write_call_outputs(pairs, plan, out, result)
    return result
