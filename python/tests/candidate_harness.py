"""The candidate worker as a subprocess for tests, driven like the C++ client drives it."""

import os
import subprocess
import sys
import tempfile

from tests.worker_harness import PYTHON_DIR, WorkerProcess


class CandidateWorkerProcess(WorkerProcess):
    """`python3 -m kforge_torch candidate-worker` as a subprocess; `exited` turns true once a
    reply said the worker leaves (exiting: a tampered process, or a lost device)."""

    def __init__(self, backend="cpu", device=0, token="0123456789abcdef0123456789abcdef"):
        self.token = token
        self.stderr = tempfile.TemporaryFile()
        environment = dict(os.environ)
        environment["PYTHONPATH"] = PYTHON_DIR + os.pathsep + environment.get("PYTHONPATH", "")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kforge_torch", "candidate-worker", "--backend", backend,
             "--device", str(device)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=environment)
        self.next_id = 1
        self.exited = False

    def request(self, cmd, **fields):
        reply = super().request(cmd, **fields)
        if reply.get("exiting"):
            self.exited = True
        return reply
