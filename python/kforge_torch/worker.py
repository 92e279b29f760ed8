"""The PyTorch reference worker: `python3 -m kforge_torch worker --backend cpu|cuda --device N`.

Speaks worker protocol v2 (src/worker/protocol.h) as kforge-worker does, on private copies of
its stdin/stdout: one JSON request per line, exactly one reply line per request carrying the
request's id and the hello's token. `load` takes a derived task file (docs/torch_tasks.md),
`run` writes the module's outputs for kforge's generated inputs, `time` times forward (as
PyTorch eager runs it, or compiled with torch.compile: the request's baseline),
`provide` writes the provided inputs (get_inputs() values) candidate workers read, `unload`
forgets a loaded task and what was kept for it (its models, compiled modules, timed input sets),
so that one worker serves task after task (`kforge task --check-batch`).
Exit status: 0 after shutdown or EOF, 1 when it cannot start, 3 after a sticky device error.
"""

import gc
import json
import resource
import sys

from kforge_torch import protocol
from kforge_torch.device import Device
from kforge_torch.protocol import ProtocolError
from kforge_torch.reference import LoadFailure, ReferenceTask
from kforge_torch.provided import provide_inputs
from kforge_torch.running import run_outputs
from kforge_torch.compiled import new_compiled_cache
from kforge_torch.timing import new_timing_cache, run_time


class Worker:
    """Answers protocol requests for one Device. handle_line() never raises for a request."""

    def __init__(self, device):
        self.device = device
        self.token = ""
        self.shutdown = False
        self.device_lost = False
        self._tasks = {}
        self._next_handle = 1
        self._timing_cache = new_timing_cache()
        self._compiled = new_compiled_cache()  # the compile baseline's modules

    def _task(self, handle):
        if handle not in self._tasks:
            raise ProtocolError("unknown kernel handle %d" % handle)
        return self._tasks[handle]

    def load(self, request):
        """LoadRequest {path: derived task JSON} -> LoadResult {verdict, message, handle}."""
        path = request.get("path")
        if not isinstance(path, str):
            raise ProtocolError("missing field 'path'")
        try:
            task = ReferenceTask(path)
        except LoadFailure as e:
            return {"verdict": "wrong_signature", "message": str(e), "handle": -1}
        handle = self._next_handle
        self._next_handle += 1
        self._tasks[handle] = task
        return {"verdict": "ok", "message": "", "handle": handle}

    def unload(self, request):
        """UnloadRequest {handle} -> {}: drops the task, the compiled modules built for it and
        the timed input sets, then collects them so that their device memory goes back (the
        caching allocator's share too, after the reply: release_cached_memory)."""
        handle = protocol.parse_unload_request(request)
        self._task(handle)  # raises for an unknown handle
        task = self._tasks.pop(handle)
        for key in [k for k in self._compiled if k[0] == id(task)]:
            del self._compiled[key]
        self._timing_cache.key, self._timing_cache.sets = None, None
        del task
        gc.collect()
        return {}

    def dispatch(self, command, request):
        """The reply body (without ok/id/token) of one request; raises ProtocolError (or any
        exception) for a harness error."""
        if command == "hello":
            token = request.get("token", "")
            if not isinstance(token, str):
                raise ProtocolError("field 'token': expected a string")
            self.token = token
            return self.device.info(measure=bool(request.get("measure", False)))
        if command == "load":
            return self.load(request)
        if command == "unload":
            return self.unload(request)
        if command == "run":
            parsed = protocol.parse_run_request(request)
            reply = run_outputs(self._task(parsed.handle), self.device, parsed)
        elif command == "time":
            parsed = protocol.parse_time_request(request)
            reply = run_time(self._task(parsed.handle), self.device, parsed, self._timing_cache,
                             self._compiled)
        elif command == "provide":
            parsed = protocol.parse_provide_request(request)
            reply = provide_inputs(self._task(parsed.handle), parsed)
        else:  # shutdown
            self.shutdown = True
            return {}
        if reply["verdict"] != "ok" and self.device.device_lost():
            self.device_lost = True
        return reply

    def handle_line(self, line):
        """The reply line (no newline) for one request line."""
        request_id = None
        try:
            try:
                request = json.loads(line)
            except ValueError as e:
                raise ProtocolError("malformed request: %s" % e)
            if not isinstance(request, dict):
                raise ProtocolError("a request must be a JSON object")
            request_id = request.get("id")
            command = request.get("cmd")
            if not isinstance(command, str):
                raise ProtocolError("missing field 'cmd'")
            if command not in protocol.COMMANDS:
                raise ProtocolError("unknown worker command '%s' (expected one of %s)"
                                    % (command, ", ".join(protocol.COMMANDS)))
            reply = dict(self.dispatch(command, request))
            reply["ok"] = True
        except Exception as e:  # a harness error: answered, and the worker keeps serving
            message = str(e) if isinstance(e, ProtocolError) else "%s: %s" % (
                type(e).__name__, e)
            reply = {"ok": False, "error": message}
            if self.device.is_cuda and self.device.device_lost():
                self.device_lost = True
        if not self.device_lost:
            try:
                self.device.release_cached_memory()
            except Exception:  # a device error here is the next request's to report
                pass
        reply["id"] = request_id
        reply["token"] = self.token
        if self.device_lost:
            reply["exiting"] = True
        return protocol.encode_reply(reply)

    def serve(self, request_fd, response_fd):
        """Serves requests until EOF or shutdown; returns the exit status."""
        for line in protocol.read_lines(request_fd):
            if not line.strip(" \t\r"):
                continue
            try:
                protocol.write_line(response_fd, self.handle_line(line))
            except OSError:
                return protocol.EXIT_HARNESS_ERROR
            if self.device_lost:
                return protocol.EXIT_DEVICE_LOST
            if self.shutdown:
                return 0
        return 0


def serve_process(name, make_worker, backend, device_index):
    """Runs `make_worker(device)` (a Worker) on this process's private request/response
    channels; returns the exit status. A harness error before serving (no such device, the
    channels) prints "kforge-torch NAME: error: ..." and exits EXIT_HARNESS_ERROR."""
    try:
        # A crashing module must not leave a core file (gigabytes with a CUDA context) behind.
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        request_fd, response_fd = protocol.take_private_channels()
        device = Device(backend, device_index)
    except Exception as e:
        sys.stderr.write("kforge-torch %s: error: %s\n" % (name, e))
        return protocol.EXIT_HARNESS_ERROR
    return make_worker(device).serve(request_fd, response_fd)


def main(backend, device_index):
    """Runs the reference worker on this process's stdin/stdout; returns the exit status."""
    return serve_process("worker", Worker, backend, device_index)
