"""The Python-candidate adversarial corpus (tests/adversarial/torch/manifest.toml) through the
candidate worker, driven over the protocol as the C++ client drives it, with the orchestrator's
part (comparing outputs with the reference's) done here from the test's own computation.

Each candidate goes through what rung 0 and rung 1 ask of a worker: load; gate runs (two calls
each) on two workloads x two seeds; a timing request with a checked call on the set's own values
and one on new values written over it. Its verdict is the first failure, and must be the
manifest's `dynamic` verdict (or `expect` where the static screen is not what catches it).
Entries marked `cuda` need a GPU: CI skips them; on the H200 they run with the cuda backend.

Needs libkforge_inputs.so ($KFORGE_INPUTS_LIB or $KFORGE_BIN_DIR); fails without it.
"""

import os
import re
import shutil
import tempfile
import tomllib
import unittest
import unittest.mock

import torch

from kforge_torch import inputs
from tests.worker_harness import expected_bytes, tensor, write_task
from tests.candidate_harness import CandidateWorkerProcess

HAS_CUDA = torch.cuda.is_available()
CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "tests", "adversarial", "torch")
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
# Verdicts only the Evaluator's judgement of timings gives (measurement.h): not asked here.
EVALUATOR_VERDICTS = ("implausible_timing",)


def setUpModule():
    inputs.load_library()  # fail, never skip, when the library is absent


def corpus_task(directory):
    """The derived task of the corpus problem: x [b, f], the linear layer's weight and bias
    (parameters), y [b, f]; gate workloads 3 x 5 and 7 x 33."""
    tensors = [tensor("x", "input", ["b", "f"]), tensor("linear_weight", "input", ["f", "f"]),
               tensor("linear_bias", "input", ["f"]), tensor("y", "output", ["b", "f"])]
    sources = [{"source": "input", "index": 0},
               {"source": "parameter", "name": "linear.weight"},
               {"source": "parameter", "name": "linear.bias"},
               {"source": "output", "index": 0}]

    def binding(b, f):
        return ({"b": b, "f": f}, {"batch_size": b, "features": f},
                [[b, f], [f, f], [f], [b, f]])

    return write_task(directory, os.path.join(CORPUS, "problem.py"), tensors, sources,
                      {"small": binding(3, 5), "tail": binding(7, 33)})


def manifest():
    with open(os.path.join(CORPUS, "manifest.toml"), "rb") as f:
        return tomllib.load(f)["candidate"]


def compare(got, want, what):
    """"" when the f32 bytes `got` match `want` within TOLERANCE, else a message naming `what`
    (the orchestrator's comparison, simplified to allclose)."""
    a = torch.frombuffer(bytearray(got), dtype=torch.float32)
    b = torch.frombuffer(bytearray(want), dtype=torch.float32)
    if a.numel() != b.numel():
        return "%s: %d values, expected %d" % (what, a.numel(), b.numel())
    if torch.allclose(a, b, **TOLERANCE):
        return ""
    worst = int((a - b).abs().argmax())
    return "%s: element %d is %g, expected %g" % (what, worst, float(a[worst]), float(b[worst]))


class Judge:
    """Runs one candidate through load, gate runs and a checked timing, as the Evaluator asks;
    verdict() returns (verdict, message) of the first failure, ("ok", "") when none."""

    def __init__(self, worker, task, directory, backend):
        self.worker, self.task, self.directory, self.backend = worker, task, directory, backend

    def _workload(self, name):
        return next(w for w in self.task["workloads"] if w["name"] == name)

    def _common(self, handle, workload, seed):
        return dict(handle=handle, signature=self.task["signature"],
                    workload=self._workload(workload), seed=seed)

    def _expected(self, workload, seed, distribution="uniform"):
        return expected_bytes(self.task, workload, seed, distribution,
                              device="cuda" if self.backend == "cuda" else "cpu")

    def gate(self, handle):
        output = os.path.join(self.directory, "out.bin")
        for workload in ("small", "tail"):
            for seed in (11, 12):
                open(output, "wb").close()
                reply = self.worker.request("run", calls=2, output_path=output,
                                            late_write_wait_ms=2.0,
                                            **self._common(handle, workload, seed))
                where = "gate %s seed %d: " % (workload, seed)
                if not reply["ok"]:
                    raise AssertionError(where + reply["error"])
                if reply["verdict"] != "ok":
                    return reply["verdict"], where + reply["message"]
                if reply["input_modified"]:
                    return "wrong_answer", where + "input %s was modified" % (
                        reply["input_modified"])
                if reply["late_write"]:
                    return "wrong_answer", where + "output %s changed late" % reply["late_write"]
                with open(output, "rb") as f:
                    got = f.read()
                want = self._expected(workload, seed)
                for call in range(2):
                    size = reply["output_bytes"]
                    failure = compare(got[call * size:(call + 1) * size], want,
                                      where + "call %d: output 'y'" % (call + 1))
                    if failure:
                        return "wrong_answer", failure
        return "ok", ""

    def timing(self, handle):
        check_path = os.path.join(self.directory, "check")
        for k in range(2):
            open("%s.%d" % (check_path, k), "wb").close()
        checks = [{"call": 2, "overwrite": False, "seed": 0, "distribution": "uniform"},
                  {"call": 5, "overwrite": True, "seed": 99, "distribution": "normal"}]
        reply = self.worker.request(
            "time", input_sets=2, flush_l2=False, checks=checks, check_path=check_path,
            policy={"warmup": 1, "min_repetitions": 8, "max_repetitions": 8,
                    "target_relative_noise": 0.0, "max_seconds": 30.0},
            **self._common(handle, "tail", 40))
        if not reply["ok"]:
            raise AssertionError("timing: " + reply["error"])
        if reply["verdict"] != "ok":
            return reply["verdict"], "timing: " + reply["message"]
        if len(reply["samples_ms"]) != 8 or len(reply["checked"]) != 2:
            raise AssertionError("timing reply %r" % reply)
        for k, checked in enumerate(reply["checked"]):
            if not re.fullmatch("[0-9a-f]{16}", str(checked["digest"])):
                raise AssertionError("digest %r is not 16 hex digits (protocol.h)"
                                     % checked["digest"])
            with open("%s.%d" % (check_path, k), "rb") as f:
                got = f.read()
            want = self._expected("tail", checked["seed"], checked["distribution"])
            failure = compare(got, want, "timed call %d: output 'y'" % checked["call"])
            if failure:
                return "wrong_answer", failure
        return "ok", ""

    def verdict(self, source):
        reply = self.worker.request("load", path=source, task_path=self.task["path"])
        if not reply["ok"]:
            raise AssertionError("load: " + reply["error"])
        if reply["verdict"] != "ok":
            return reply["verdict"], "load: " + reply["message"]
        for step in (self.gate, self.timing):
            verdict, message = step(reply["handle"])
            if verdict != "ok":
                return verdict, message
        return "ok", ""


class CandidateCorpusTest(unittest.TestCase):
    """Every manifest entry gets its labelled verdict from the candidate worker."""
    backend = "cpu"
    worker_environment = {}  # set in the worker's environment

    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="kforge_candidate_corpus_")
        cls.task = corpus_task(cls.directory)
        cls.worker = None

    @classmethod
    def tearDownClass(cls):
        if cls.worker is not None:
            cls.worker.close()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def judge(self, entry):
        if self.worker is None or self.worker.exited:
            if self.worker is not None:
                self.worker.close()
            with unittest.mock.patch.dict(os.environ, self.worker_environment):
                type(self).worker = CandidateWorkerProcess(self.backend)
            self.worker.request("hello", measure=False)
        judge = Judge(self.worker, self.task, self.directory, self.backend)
        return judge.verdict(os.path.join(CORPUS, entry["file"]))

    def test_every_candidate_gets_its_verdict(self):
        entries = [e for e in manifest() if bool(e.get("cuda", False)) == (self.backend == "cuda")]
        self.assertGreaterEqual(len(entries), 3)
        for entry in entries:
            with self.subTest(candidate=entry["file"]):
                expected = entry.get("dynamic", entry["expect"])
                if expected in EVALUATOR_VERDICTS:
                    self.skipTest("%s: %s is the Evaluator's judgement of the timing (the "
                                  "host-clock cross-check), not the worker's" % (entry["file"],
                                                                                 expected))
                verdict, message = self.judge(entry)
                self.assertEqual(verdict, expected, message)
                self.assertIn(entry["reason"], message.lower())


@unittest.skipUnless(HAS_CUDA, "needs a CUDA device (the H200 run)")
class CandidateCorpusCudaTest(CandidateCorpusTest):
    """The corpus entries marked cuda (streams, Triton, load_inline) on the cuda backend."""
    backend = "cuda"


class CandidateCorpusUnheldTest(CandidateCorpusTest):
    """The same verdicts when the worker holds no call's copies for the next (as it does past
    candidate_run.HOLD_LIMIT_BYTES, KernelBench 23 and 36's gigabyte tensors): a candidate that
    returns a result it kept is still caught (the outputs are watched through weak references),
    and one that caches by address is caught by the checked calls."""
    worker_environment = {"KFORGE_CANDIDATE_HOLD_LIMIT_BYTES": "0"}


if __name__ == "__main__":
    unittest.main()
