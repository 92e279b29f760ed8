"""The `provide` command of the reference worker: the provided inputs of a workload, written for
candidate workers (src/worker/provided_inputs.h).

A provided input (TensorSpec.provided) is one whose meaning constrains its values (class ids, a
mask, a symmetric or triangular matrix): its values come from the problem's own get_inputs()
(or Model(), for a buffer) under each seed, which only this worker runs. For every seed asked,
each provided tensor's row-major bytes go to "<dir>/<workload>.<seed>.<tensor index>.bin",
written under a temporary name and renamed, so a reader never sees half a file.
"""

import os
import time

from kforge_torch import inputs as kinputs
from kforge_torch.protocol import ProtocolError
from kforge_torch.reference import describe_exception


def provided_file(directory, workload_name, seed, tensor_index):
    """The file of provided tensor `tensor_index` at (workload, seed): the name of
    provided_input_file in src/worker/provided_inputs.cpp."""
    return os.path.join(directory, "%s.%d.%d.bin" % (workload_name, seed, tensor_index))


def provide_inputs(task, request):
    """Answers a ProvideRequest for ReferenceTask `task`; returns a ProvideResult dict
    {verdict, message, bytes_written, seconds}. The module's own failures (get_inputs()
    raising) are verdict runtime_error; a malformed request, a missing folder or a value that
    does not fit the signature raise ProtocolError."""
    if not os.path.isdir(request.dir):
        raise ProtocolError("provide: folder %s does not exist (the orchestrator makes it)"
                            % request.dir)
    plan = task.plan(request.signature, request.workload)
    wanted = [i for i, entry in enumerate(plan) if entry.spec.provided]
    result = {"verdict": "ok", "message": "", "bytes_written": 0, "seconds": 0.0}
    start = time.perf_counter()
    for seed in request.seeds:
        try:
            values = task.provided_values(plan, request.workload.name, seed)
        except ProtocolError:
            raise
        except Exception as e:
            result["verdict"] = "runtime_error"
            result["message"] = "making the provided inputs of workload '%s', seed %d: %s" % (
                request.workload.name, seed, describe_exception(e))
            break
        for i in wanted:
            path = provided_file(request.dir, request.workload.name, seed, i)
            partial = path + ".partial"
            with open(partial, "wb") as out:
                kinputs.write_raw(values[i], out)
            os.replace(partial, path)
            result["bytes_written"] += values[i].numel() * values[i].element_size()
    result["seconds"] = time.perf_counter() - start
    return result
