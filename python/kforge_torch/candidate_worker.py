"""The candidate worker: `python3 -m kforge_torch candidate-worker --backend cpu|cuda --device N`.

Runs Python candidates (a KernelBench-format source with `class ModelNew(nn.Module)`,
candidate.py) for a PyTorch-problem task, in a process of their own: never the reference
worker's, and expected outputs never enter it. It speaks worker protocol v2
(src/worker/protocol.h) exactly as kforge-worker does, on private copies of stdin/stdout:

- `load` {path: the candidate's source, task_path: the derived task JSON} imports the source and
  checks ModelNew (verdicts compile_error, wrong_signature, runtime_error, rejected_by_policy);
- `run` writes the candidate's outputs for kforge's generated inputs (candidate_run.py), with
  the checks a module that allocates its own outputs needs; with `nvtx_range` (profiling under
  ncu) the last call's forward, and only it, runs inside that NVTX range;
- `time` times it with the reference worker's measurement policy, L2 flush and rotated input
  sets, with checked calls (candidate_timing.py);
- `provide` is refused (ok: false), as kforge-worker refuses it;
- `unload` forgets a candidate (its module, its copies, the timed input sets).

The harness (timers, synchronize, its own functions) is snapshotted before any candidate is
imported (candidate_guard.TamperWatch) and checked after every import and call.
Exit status: 0 after shutdown or EOF, 1 when it cannot start, 3 after a sticky device error.
"""

import gc
import os
import tempfile
import types

from kforge_torch import protocol
from kforge_torch.candidate import Candidate, CandidateFailure, CandidateTask
from kforge_torch.candidate_guard import TamperWatch
from kforge_torch.candidate_run import release_copies, run_candidate
from kforge_torch.candidate_timing import run_candidate_time
from kforge_torch.protocol import ProtocolError
from kforge_torch.timing import new_timing_cache
from kforge_torch.worker import Worker, serve_process


class CandidateWorker(Worker):
    """Answers protocol requests for Python candidates on one Device. handle_line() (Worker's)
    never raises for a request."""

    def __init__(self, device):
        super().__init__(device)
        self._tasks = {}       # derived task path -> CandidateTask, shared by its candidates
        self._candidates = {}  # handle -> session namespace
        self._timing_cache = new_timing_cache()
        self.watch = TamperWatch(device)

    def load(self, request):
        """LoadRequest {path: candidate source, task_path: derived task JSON} -> LoadResult
        {verdict, message, handle}. A bad task file is a harness error (ProtocolError)."""
        path = request.get("path")
        task_path = request.get("task_path")
        if not isinstance(path, str) or not path:
            raise ProtocolError("missing field 'path' (the candidate's source)")
        if not isinstance(task_path, str) or not task_path:
            raise ProtocolError("the candidate worker needs field 'task_path' (the derived task "
                                "JSON the candidate is evaluated for)")
        if task_path not in self._tasks:
            self._tasks[task_path] = CandidateTask(task_path)
        try:
            candidate = Candidate(self._tasks[task_path], os.path.abspath(path))
        except CandidateFailure as e:
            return {"verdict": e.verdict, "message": str(e), "handle": -1}
        tampered = self.watch.violation()
        if tampered:
            # The process is no longer trustworthy: answer, then leave (the client respawns).
            self.device_lost = True
            return {"verdict": "rejected_by_policy", "handle": -1,
                    "message": "importing the candidate changed the harness: " + tampered}
        handle = self._next_handle
        self._next_handle += 1
        self._candidates[handle] = types.SimpleNamespace(
            candidate=candidate, device=self.device, watch=self.watch, earlier_outputs=[],
            earlier_weak=[], previous_inputs={})
        return {"verdict": "ok", "message": "", "handle": handle}

    def _session(self, handle):
        """The session of `handle`. The other sessions let go of their last call's copies
        (release_copies): they keep two calls of one candidate apart, and a candidate not being
        run holds device memory the one being run may need."""
        if handle not in self._candidates:
            raise ProtocolError("unknown kernel handle %d" % handle)
        for other, session in self._candidates.items():
            if other != handle:
                release_copies(session)
        return self._candidates[handle]

    def unload(self, request):
        """UnloadRequest {handle} -> {}: drops the candidate's session and the timed input sets.
        Its derived task stays (other candidates of the task share it)."""
        handle = protocol.parse_unload_request(request)
        if self._candidates.pop(handle, None) is None:
            raise ProtocolError("unknown kernel handle %d" % handle)
        self._timing_cache.key, self._timing_cache.sets = None, None
        gc.collect()
        return {}

    def dispatch(self, command, request):
        """The reply body of one request (Worker.dispatch's contract)."""
        if command == "unload":
            return self.unload(request)
        if command in ("hello", "load", "shutdown"):
            return super().dispatch(command, request)
        if command == "provide":
            raise ProtocolError("the candidate worker does not make provided inputs (only the "
                                "reference worker runs the problem's code)")
        if command == "run":
            parsed = protocol.parse_run_request(request)
            parsed.provided_dir = request.get("provided_dir", "") or ""
            session = self._session(parsed.handle)
            reply = run_candidate(session, parsed)
        else:  # time
            parsed = protocol.parse_time_request(request)
            parsed.provided_dir = request.get("provided_dir", "") or ""
            session = self._session(parsed.handle)
            reply = run_candidate_time(session, parsed, self._timing_cache)
        if reply["verdict"] == "rejected_by_policy":
            self.device_lost = True  # a tampered process serves nothing more: respawned
        elif reply["verdict"] != "ok" and self.device.device_lost():
            self.device_lost = True
        return reply


def build_folders(environ):
    """Sets where load_inline and Triton build a candidate's kernels, when `environ` (a mapping,
    os.environ) does not say: TORCH_EXTENSIONS_DIR and TRITON_CACHE_DIR under the temporary
    folder ($TMPDIR), one per user. Their defaults are under ~/.cache and ~/.triton, which the
    sandbox keeps read-only (only /dev/shm and $TMPDIR are writable there). kforge's own worker
    setup also sets KFORGE_TORCH_EXTENSIONS_ROOT, which candidate.extensions_dir prefers for
    load_inline. Returns the two paths."""
    base = os.path.join(tempfile.gettempdir(), "kforge-%d" % os.getuid())
    environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(base, "torch_extensions"))
    environ.setdefault("TRITON_CACHE_DIR", os.path.join(base, "triton_cache"))
    return environ["TORCH_EXTENSIONS_DIR"], environ["TRITON_CACHE_DIR"]


def main(backend, device_index):
    """Runs the candidate worker on this process's stdin/stdout; returns the exit status."""
    build_folders(os.environ)
    return serve_process("candidate-worker", CandidateWorker, backend, device_index)
