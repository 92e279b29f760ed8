"""The candidate worker's protocol details and its guards, apart from the corpus
(test_candidate_corpus.py): requests it refuses, provided inputs read from the reference's
files, and the storage and tamper checks on their own.

Needs libkforge_inputs.so ($KFORGE_INPUTS_LIB or $KFORGE_BIN_DIR); fails without it.
"""

import os
import shutil
import tempfile
import time
import unittest
import unittest.mock

import torch

from kforge_torch import inputs
from kforge_torch.candidate_guard import TamperWatch, find_alias, storage_span
from kforge_torch.candidate_run import CallFailure, is_out_of_memory, prepare
from kforge_torch.candidate_worker import build_folders
from kforge_torch.device import Device
from kforge_torch.problem_module import load_problem
from tests.candidate_harness import CandidateWorkerProcess
from tests.test_candidate_corpus import CORPUS, corpus_task
from tests.test_worker import masked_pick_task, workload
from tests.worker_harness import problem

MASKED_PICK_CANDIDATE = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, mask, ids):
        picked = torch.gather(x, 1, ids.view(-1, 1)).view(-1)
        return torch.where(mask, x, torch.zeros_like(x)).sum(dim=1) + picked
'''


def setUpModule():
    inputs.load_library()  # fail, never skip, when the library is absent


class CandidateWorkerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.worker = CandidateWorkerProcess()
        cls.hello = cls.worker.request("hello", measure=False)

    @classmethod
    def tearDownClass(cls):
        cls.worker.close()

    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="kforge_candidate_worker_test_")
        self.addCleanup(shutil.rmtree, self.directory, True)
        self.task = corpus_task(self.directory)

    def load(self, source, task=None):
        task = task or self.task
        reply = self.worker.request("load", path=source, task_path=task["path"])
        self.assertTrue(reply["ok"], reply)
        self.assertEqual(reply["verdict"], "ok", reply)
        return reply["handle"]

    def honest(self):
        return self.load(os.path.join(CORPUS, "candidates", "honest_torch.py"))

    def test_hello_is_protocol_2(self):
        self.assertEqual(self.hello["protocol_version"], 2)
        self.assertEqual(self.hello["backend"], "cpu")

    def test_load_without_task_path_is_refused(self):
        reply = self.worker.request("load", path=os.path.join(CORPUS, "candidates",
                                                               "honest_torch.py"))
        self.assertFalse(reply["ok"])
        self.assertIn("task_path", reply["error"])

    def test_a_task_file_that_is_not_a_task_is_a_harness_error(self):
        bogus = os.path.join(self.directory, "bogus.json")
        with open(bogus, "w") as f:
            f.write("{}")
        reply = self.worker.request("load", path=os.path.join(CORPUS, "candidates",
                                                               "honest_torch.py"),
                                    task_path=bogus)
        self.assertFalse(reply["ok"])
        self.assertIn("bogus.json", reply["error"])

    def test_provide_is_refused(self):
        handle = self.honest()
        reply = self.worker.request("provide", handle=handle, signature=self.task["signature"],
                                    workload=workload(self.task, "small"), seeds=[1],
                                    dir=self.directory)
        self.assertFalse(reply["ok"])
        self.assertIn("does not make provided inputs", reply["error"])

    def test_padded_inputs_are_refused(self):
        handle = self.honest()
        output = os.path.join(self.directory, "out.bin")
        open(output, "wb").close()
        reply = self.worker.request("run", handle=handle, signature=self.task["signature"],
                                    workload=workload(self.task, "small"), seed=1,
                                    output_path=output, padded=True)
        self.assertFalse(reply["ok"])
        self.assertIn("padded", reply["error"])

    def test_a_check_past_min_repetitions_is_refused(self):
        handle = self.honest()
        reply = self.worker.request(
            "time", handle=handle, signature=self.task["signature"],
            workload=workload(self.task, "small"), seed=1, check_path=self.directory + "/c",
            checks=[{"call": 4}], policy={"warmup": 0, "min_repetitions": 4,
                                          "max_repetitions": 4, "max_seconds": 5.0})
        self.assertFalse(reply["ok"])
        self.assertIn("below min_repetitions", reply["error"])

    def test_baseline_compile_is_refused(self):
        handle = self.honest()
        reply = self.worker.request("time", handle=handle, signature=self.task["signature"],
                                    workload=workload(self.task, "small"), seed=1,
                                    baseline="compile")
        self.assertFalse(reply["ok"])
        self.assertIn("candidates only", reply["error"])

    def test_timing_reports_samples_and_rotated_sets(self):
        handle = self.honest()
        reply = self.worker.request(
            "time", handle=handle, signature=self.task["signature"],
            workload=workload(self.task, "tail"), seed=5, input_sets=3, flush_l2=False,
            policy={"warmup": 2, "min_repetitions": 6, "max_repetitions": 6,
                    "target_relative_noise": 0.0, "max_seconds": 30.0})
        self.assertTrue(reply["ok"], reply)
        self.assertEqual(reply["verdict"], "ok", reply)
        self.assertEqual(len(reply["samples_ms"]), 6)
        self.assertEqual(len(reply["host_ms"]), 6)
        self.assertEqual(len(reply["warmup_ms"]), 2)
        self.assertEqual(reply["input_sets_used"], 3)
        self.assertEqual(reply["stop_reason"], "max_repetitions")
        self.assertTrue(all(h >= s for h, s in zip(reply["host_ms"], reply["samples_ms"])))

    def test_checked_outputs_already_verified_or_repeated_are_not_written(self):
        handle = self.honest()
        output = os.path.join(self.directory, "out.bin")
        open(output, "wb").close()
        common = dict(handle=handle, signature=self.task["signature"],
                      workload=workload(self.task, "tail"))
        run = self.worker.request("run", calls=2, output_path=output, digest=True, seed=40,
                                  **common)
        self.assertEqual(run["verdict"], "ok", run)
        self.assertEqual(len(run["digests"]), 2)
        self.assertEqual(run["digests"][0], run["digests"][1])  # same inputs, same outputs
        check_path = os.path.join(self.directory, "check")
        for k in range(3):
            open("%s.%d" % (check_path, k), "wb").close()
        checks = [{"call": 1}, {"call": 2}, {"call": 3, "overwrite": True, "seed": 7}]
        policy = {"warmup": 0, "min_repetitions": 4, "max_repetitions": 4,
                  "target_relative_noise": 0.0, "max_seconds": 30.0}

        def time(verified):
            reply = self.worker.request("time", seed=40, input_sets=1, flush_l2=False,
                                        checks=checks, check_path=check_path, policy=policy,
                                        verified=verified, **common)
            self.assertEqual(reply["verdict"], "ok", reply)
            return reply["checked"]

        # Set 0 is seed 40's values, which the run above verified.
        checked = time([{"seed": 40, "distribution": "uniform", "digest": run["digests"][0]}])
        self.assertEqual([c["offset"] for c in checked], [-1, -1, 0])
        self.assertEqual(checked[0]["digest"], run["digests"][0])
        self.assertEqual(os.path.getsize(check_path + ".0"), 0)
        self.assertEqual(os.path.getsize(check_path + ".2"), 7 * 33 * 4)
        # Unverified: the first check is written, the second repeats it (same inputs, bytes).
        checked = time([])
        self.assertEqual([(c["offset"], c["same_as"]) for c in checked], [(0, -1), (-1, 1),
                                                                           (0, -1)])
        self.assertEqual(os.path.getsize(check_path + ".0"), 7 * 33 * 4)

    def test_provided_inputs_are_read_from_the_reference_files(self):
        task = masked_pick_task(self.directory)
        source = os.path.join(self.directory, "masked_pick_new.py")
        with open(source, "w") as f:
            f.write(MASKED_PICK_CANDIDATE)
        handle = self.load(source, task)
        # What the reference worker's provide writes: get_inputs() values under the seed.
        module = load_problem(problem("masked_pick"), {"rows": 5, "cols": 9})
        torch.manual_seed(3)
        _, mask, ids = module.get_inputs()
        provided = os.path.join(self.directory, "provided")
        os.mkdir(provided)
        for index, value in ((1, mask), (2, ids)):
            with open(os.path.join(provided, "small.3.%d.bin" % index), "wb") as f:
                f.write(inputs.raw_bytes(value))
        output = os.path.join(self.directory, "out.bin")
        open(output, "wb").close()
        request = dict(handle=handle, signature=task["signature"],
                       workload=workload(task, "small"), seed=3, output_path=output)
        reply = self.worker.request("run", **request)
        self.assertFalse(reply["ok"])  # without provided_dir: the worker cannot make them
        self.assertIn("provided_dir", reply["error"])
        reply = self.worker.request("run", provided_dir=provided, **request)
        self.assertEqual(reply["verdict"], "ok", reply)
        x = inputs.generate("f32", [5, 9], 3, 0, "uniform")
        expected = (x * mask).sum(dim=1) + x.gather(1, ids.unsqueeze(1)).squeeze(1)
        with open(output, "rb") as f:
            got = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
        self.assertTrue(torch.allclose(got, expected, rtol=1e-5, atol=1e-6), (got, expected))


class GuardTest(unittest.TestCase):
    def test_a_view_of_an_input_aliases_it(self):
        x = torch.rand(4, 6)
        self.assertEqual(find_alias(x[1:], [("input 'x'", x)]), "input 'x'")
        self.assertEqual(find_alias(x.view(24), [("input 'x'", x)]), "input 'x'")
        self.assertEqual(find_alias(x.clone(), [("input 'x'", x)]), "")

    def test_storage_span_covers_the_whole_allocation(self):
        x = torch.rand(10)
        start, end = storage_span(x[3:5])
        self.assertEqual(start, x.data_ptr())
        self.assertEqual(end - start, 10 * 4)

    def test_tamper_watch_sees_a_replaced_kforge_function_and_a_live_thread(self):
        import threading
        from kforge_torch import running
        watch = TamperWatch(Device("cpu", 0))
        self.assertEqual(watch.violation(), "")
        original = running.ms_since
        running.ms_since = lambda start: 0.0
        try:
            self.assertIn("kforge_torch.running.ms_since was replaced", watch.violation())
        finally:
            running.ms_since = original
        self.assertEqual(watch.violation(), "")
        stop = threading.Event()
        thread = threading.Thread(target=stop.wait, name="lingering")
        thread.start()
        try:
            self.assertIn("lingering", watch.violation())
        finally:
            stop.set()
            thread.join()
        deadline = time.time() + 5
        while watch.violation() and time.time() < deadline:
            time.sleep(0.01)
        self.assertEqual(watch.violation(), "")


class OutOfMemoryTest(unittest.TestCase):
    """Device memory that runs out while the worker prepares a candidate is that candidate's
    runtime_error (the run goes on), not a refused request that ends the run (seen on an 80 GB
    H100 at KernelBench 36's 7 GB inputs)."""

    def oom(self):
        error_type = getattr(torch.cuda, "OutOfMemoryError", None)
        if error_type is None:
            return RuntimeError("CUDA out of memory. Tried to allocate 7.00 GiB")
        return error_type("CUDA out of memory. Tried to allocate 7.00 GiB")

    def session(self, build=None, generate=None):
        from types import SimpleNamespace
        task = SimpleNamespace(provided_dir="", generate_inputs=generate or (lambda *a, **k: {}))
        candidate = SimpleNamespace(task=task, build=build or (lambda *a: torch.nn.Identity()))
        return SimpleNamespace(candidate=candidate,
                               device=SimpleNamespace(torch_device=torch.device("cpu")))

    def request(self):
        from types import SimpleNamespace
        return SimpleNamespace(workload=SimpleNamespace(name="big"), seed=1,
                               distribution="uniform")

    def raising(self, error):
        def call(*args, **kwargs):
            raise error
        return call

    def test_out_of_memory_is_recognized_and_other_errors_are_not(self):
        self.assertTrue(is_out_of_memory(self.oom()))
        self.assertTrue(is_out_of_memory(RuntimeError("CUDA error: out of memory")))
        self.assertFalse(is_out_of_memory(RuntimeError("shape mismatch")))
        self.assertFalse(is_out_of_memory(ValueError("out of memory")))

    def test_inputs_that_do_not_fit_are_the_candidates_runtime_error(self):
        session = self.session(generate=self.raising(self.oom()))
        with unittest.mock.patch("kforge_torch.candidate_run.map_parameters", return_value={}):
            with self.assertRaises(CallFailure) as caught:
                prepare(session, self.request(), [])
        self.assertEqual(caught.exception.verdict, "runtime_error")
        self.assertIn("out of device memory while making the inputs", str(caught.exception))

    def test_a_model_that_does_not_fit_is_the_candidates_runtime_error(self):
        session = self.session(build=self.raising(self.oom()))
        with self.assertRaises(CallFailure) as caught:
            prepare(session, self.request(), [])
        self.assertEqual(caught.exception.verdict, "runtime_error")
        self.assertIn("while building ModelNew", str(caught.exception))

    def test_other_harness_errors_still_propagate(self):
        session = self.session(generate=self.raising(KeyError("x")))
        with unittest.mock.patch("kforge_torch.candidate_run.map_parameters", return_value={}):
            with self.assertRaises(KeyError):
                prepare(session, self.request(), [])


class BuildFoldersTest(unittest.TestCase):
    """Where load_inline and Triton build: under $TMPDIR unless the environment says."""

    def test_defaults_are_under_the_temporary_folder_and_given_values_stay(self):
        environ = {}
        extensions, triton = build_folders(environ)
        base = os.path.join(tempfile.gettempdir(), "kforge-%d" % os.getuid())
        self.assertEqual(extensions, os.path.join(base, "torch_extensions"))
        self.assertEqual(triton, os.path.join(base, "triton_cache"))
        self.assertEqual(build_folders({"TORCH_EXTENSIONS_DIR": "/x", "TRITON_CACHE_DIR": "/y"}),
                         ("/x", "/y"))


if __name__ == "__main__":
    unittest.main()


class ExtensionsDirTest(unittest.TestCase):
    """A candidate's load_inline builds go to a folder of its content hash under kforge's cache."""

    def test_import_and_constructor_see_the_candidate_folder(self):
        from kforge_torch.candidate import extensions_dir, load_source
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "records.py")
            with open(path, "w") as f:
                f.write("import os\nSEEN = os.environ.get('TORCH_EXTENSIONS_DIR')\n")
            root = os.path.join(directory, "extensions")
            before = os.environ.get("TORCH_EXTENSIONS_DIR")
            with unittest.mock.patch.dict(os.environ, {"KFORGE_TORCH_EXTENSIONS_ROOT": root}):
                module = load_source(path)
                self.assertEqual(module.SEEN, os.path.join(root, module.__name__))
                self.assertTrue(module.__name__.startswith("kforge_candidate_"))
                self.assertEqual(os.environ.get("TORCH_EXTENSIONS_DIR"), before)  # restored
                with extensions_dir("other"):
                    self.assertEqual(os.environ["TORCH_EXTENSIONS_DIR"],
                                     os.path.join(root, "other"))
                self.assertEqual(os.environ.get("TORCH_EXTENSIONS_DIR"), before)
            # Without kforge's root (a user's own process), nothing is changed.
            with unittest.mock.patch.dict(os.environ, {}, clear=False):
                os.environ.pop("KFORGE_TORCH_EXTENSIONS_ROOT", None)
                module = load_source(path)
                self.assertEqual(module.SEEN, before)
