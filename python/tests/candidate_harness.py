"""The candidate worker as a subprocess for tests, driven like the C++ client drives it."""

from tests.worker_harness import WorkerProcess


class CandidateWorkerProcess(WorkerProcess):
    """`python3 -m kforge_torch candidate-worker` as a subprocess; `exited` turns true once a
    reply said the worker leaves (exiting: a tampered process, or a lost device)."""

    command = "candidate-worker"

    def __init__(self, backend="cpu", device=0, token="0123456789abcdef0123456789abcdef"):
        super().__init__(backend, device, token)
        self.exited = False

    def request(self, cmd, **fields):
        reply = super().request(cmd, **fields)
        if reply.get("exiting"):
            self.exited = True
        return reply
