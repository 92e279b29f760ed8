"""The reference worker as a user (the C++ client) sees it: a subprocess speaking protocol v2.

Needs libkforge_inputs.so ($KFORGE_INPUTS_LIB or $KFORGE_BIN_DIR); fails without it.
"""

import os
import shutil
import tempfile
import unittest
from unittest import mock

import torch

from kforge_torch import inputs, protocol, reference
from kforge_torch.problem_module import load_problem
from tests.worker_harness import (WorkerProcess, expected_bytes, problem, tensor, write_task)

HAS_CUDA = torch.cuda.is_available()


def setUpModule():
    inputs.load_library()  # fail, never skip, when the library is absent


def softmax_task(directory, double_reference=True):
    x = tensor("x", "input", ["rows", "cols"])
    y = tensor("y", "output", ["rows", "cols"])
    return write_task(directory, problem("softmax_rows"), [x, y],
                      [{"source": "input", "index": 0}, {"source": "output", "index": 0}],
                      {"tail": ({"rows": 5, "cols": 37}, {"batch_size": 5, "dim": 37},
                                [[5, 37], [5, 37]]),
                       "own": ({"rows": 8, "cols": 100}, {}, [[8, 100], [8, 100]])},
                      double_reference)


def linear_task(directory, double_reference=True):
    # x is seen by the signature as one flat vector: a view of the module's [b, k].
    tensors = [tensor("x", "input", ["bk"]), tensor("w", "input", ["n", "k"]),
               tensor("bias", "input", ["n"]), tensor("y", "output", ["b", "n"])]
    sources = [{"source": "input", "index": 0},
               {"source": "parameter", "name": "linear.weight"},
               {"source": "parameter", "name": "linear.bias"},
               {"source": "output", "index": 0}]
    constants = {"batch_size": 3, "in_features": 5, "out_features": 7}
    return write_task(directory, problem("linear_gelu"), tensors, sources,
                      {"small": ({"bk": 15, "b": 3, "k": 5, "n": 7}, constants,
                                 [[3, 5], [7, 5], [7], [3, 7]])}, double_reference)


def misbehaving_task(directory, mode, out_shape=("n",), outputs=1):
    tensors = [tensor("x", "input", ["n"]), tensor("y", "output", list(out_shape))]
    sources = [{"source": "input", "index": 0}, {"source": "output", "index": 0}]
    shapes = [[12], [12]]
    if outputs == 2:
        tensors.append(tensor("s", "output", ["1"]))
        sources.append({"source": "output", "index": 1})
        shapes.append([1])
    return write_task(directory, problem("misbehaves"), tensors, sources,
                      {"w": ({"n": 12}, {"mode": mode}, shapes)})


def workload(task, name):
    return next(w for w in task["workloads"] if w["name"] == name)


class WorkerTestCase(unittest.TestCase):
    backend = "cpu"

    # One worker per class: starting one imports torch (seconds).
    @classmethod
    def setUpClass(cls):
        cls.worker = WorkerProcess(cls.backend)
        cls.hello = cls.worker.request("hello", measure=False)

    @classmethod
    def tearDownClass(cls):
        cls.worker.close()

    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="kforge_torch_test_")

    def tearDown(self):
        shutil.rmtree(self.directory)

    def load(self, task):
        reply = self.worker.request("load", path=task["path"])
        self.assertTrue(reply["ok"], reply)
        self.assertEqual(reply["verdict"], "ok", reply)
        return reply["handle"]

    def output_file(self):
        path = os.path.join(self.directory, "out%d.bin" % self.worker.next_id)
        open(path, "wb").close()
        return path

    def run_request(self, task, handle, workload_name, seed=7, calls=1, **fields):
        path = self.output_file()
        reply = self.worker.request("run", handle=handle, signature=task["signature"],
                                    workload=workload(task, workload_name), seed=seed,
                                    calls=calls, output_path=path, **fields)
        self.assertTrue(reply["ok"], reply)
        with open(path, "rb") as f:
            return reply, f.read()


class HelloTest(WorkerTestCase):
    def test_hello_describes_the_device_and_echoes_the_token(self):
        self.assertTrue(self.hello["ok"])
        self.assertEqual(self.hello["protocol_version"], 2)
        self.assertEqual(self.hello["backend"], "cpu")
        self.assertEqual(self.hello["device_index"], 0)
        self.assertTrue(self.hello["name"])
        self.assertTrue(self.hello["runtime_version"].startswith("torch "))
        self.assertGreater(self.hello["memory_bytes"], 0)
        self.assertEqual(self.hello["copy_bytes_per_s"], 0)
        measured = self.worker.request("hello", measure=True)
        self.assertGreater(measured["copy_bytes_per_s"], 1e8)


class RunTest(WorkerTestCase):
    def test_outputs_equal_what_torch_computes_in_float64(self):
        task = softmax_task(self.directory)
        handle = self.load(task)
        for name in ("tail", "own"):
            for distribution in ("uniform", "heavy_tailed"):
                reply, data = self.run_request(task, handle, name, seed=11, calls=2,
                                               distribution=distribution)
                self.assertEqual(reply["verdict"], "ok", reply)
                self.assertEqual(reply["calls_completed"], 2)
                dims = workload(task, name)["dims"]
                self.assertEqual(reply["output_bytes"], dims["rows"] * dims["cols"] * 4)
                self.assertEqual(len(reply["call_ms"]), 2)
                self.assertEqual(reply["input_modified"], "")
                expected = expected_bytes(task, name, 11, distribution)
                self.assertEqual(data, expected + expected)

    def test_remapped_inputs_give_the_probes_outputs(self):
        # The self-test probes (RunRequest.remap) reach the torch reference's generated inputs.
        task = softmax_task(self.directory)
        handle = self.load(task)
        plain = expected_bytes(task, "tail", 11, "spike")
        for remap in ("every_16th", "half_rows"):
            with self.subTest(remap=remap):
                reply, data = self.run_request(task, handle, "tail", seed=11,
                                               distribution="spike", remap=remap)
                self.assertEqual(reply["verdict"], "ok", reply)
                self.assertEqual(data, expected_bytes(task, "tail", 11, "spike", remap=remap))
                self.assertNotEqual(data, plain)
        reply = self.worker.request("run", handle=handle, signature=task["signature"],
                                    workload=workload(task, "tail"), seed=1,
                                    output_path=self.output_file(), remap="strided")
        self.assertFalse(reply["ok"])
        self.assertIn("unknown input remap 'strided'", reply["error"])

    def test_in_the_inputs_dtype_without_double_reference(self):
        task = softmax_task(self.directory, double_reference=False)
        _, data = self.run_request(task, self.load(task), "tail", seed=3)
        self.assertEqual(data, expected_bytes(task, "tail", 3))
        self.assertNotEqual(data, expected_bytes(task, "tail", 3, double=True))

    def test_parameters_come_from_the_generator(self):
        for double_reference in (True, False):
            task = linear_task(self.directory, double_reference)
            handle = self.load(task)
            reply, data = self.run_request(task, handle, "small", seed=5, distribution="normal")
            self.assertEqual(reply["verdict"], "ok", reply)
            self.assertEqual(data, expected_bytes(task, "small", 5, "normal"))
            # The module's prints went to stderr, not into the protocol.
            self.assertIn("forward on (3, 5)", self.worker.stderr_text())

    def test_two_outputs_in_signature_order(self):
        task = misbehaving_task(self.directory, "tuple", outputs=2)
        reply, data = self.run_request(task, self.load(task), "w", seed=2)
        self.assertEqual(reply["verdict"], "ok", reply)
        self.assertEqual(reply["output_bytes"], 13 * 4)
        self.assertEqual(data, expected_bytes(task, "w", 2))

    def test_forward_that_raises_is_a_runtime_error(self):
        task = write_task(self.directory, problem("raises"),
                          [tensor("x", "input", ["n"]), tensor("y", "output", ["n"])],
                          [{"source": "input", "index": 0}, {"source": "output", "index": 0}],
                          {"w": ({"n": 16}, {}, [[16], [16]])})
        handle = self.load(task)
        reply, _ = self.run_request(task, handle, "w")
        self.assertEqual(reply["verdict"], "runtime_error")
        self.assertIn("ValueError: this module refuses to run", reply["message"])
        # The worker keeps serving.
        self.assertTrue(self.worker.request("hello")["ok"])

    def test_forward_that_writes_its_argument_works_on_a_fresh_copy_each_call(self):
        # In-place modules (ReLU(inplace=True)) are common: forward gets a clone, so the
        # generated input stays intact and both calls see the same values.
        task = misbehaving_task(self.directory, "writes_input")
        reply, outputs = self.run_request(task, self.load(task), "w", calls=2)
        self.assertEqual(reply["verdict"], "ok", reply)
        self.assertEqual(reply["input_modified"], "")
        half = len(outputs) // 2
        self.assertEqual(outputs[:half], outputs[half:])

    def test_wrong_outputs_are_runtime_errors_naming_what_came_back(self):
        task = misbehaving_task(self.directory, "short_output")
        reply, _ = self.run_request(task, self.load(task), "w")
        self.assertEqual(reply["verdict"], "runtime_error")
        self.assertIn("shape [11] (11 elements)", reply["message"])
        task = misbehaving_task(self.directory, "not_a_tensor")
        reply, _ = self.run_request(task, self.load(task), "w")
        self.assertEqual(reply["verdict"], "runtime_error")
        self.assertIn("forward returned float", reply["message"])


def masked_pick_task(directory):
    """tests/problems/masked_pick.py with its mask (bool) and class ids (i64) provided."""
    mask = dict(tensor("mask", "input", ["rows", "cols"], "bool"), provided=True)
    ids = dict(tensor("ids", "input", ["rows"], "i64"), provided=True)
    return write_task(
        directory, problem("masked_pick"),
        [tensor("x", "input", ["rows", "cols"]), mask, ids, tensor("y", "output", ["rows"])],
        [{"source": "input", "index": 0}, {"source": "input", "index": 1},
         {"source": "input", "index": 2}, {"source": "output", "index": 0}],
        {"small": ({"rows": 5, "cols": 9}, {"rows": 5, "cols": 9},
                   [[5, 9], [5, 9], [5], [5]])})


def scalar_task(directory, scalars, torch_scalars):
    """tests/problems/scale_by_scalar.py: forward(A, s) = A * s, s a float after the tensor."""
    a = tensor("A", "input", ["m", "n"])
    y = tensor("y", "output", ["m", "n"])
    return write_task(directory, problem("scale_by_scalar"), [a, y],
                      [{"source": "input", "index": 0}, {"source": "output", "index": 0}],
                      {"small": ({"m": 3, "n": 5}, {"M": 3, "N": 5}, [[3, 5], [3, 5]])},
                      scalars=scalars, torch_scalars=torch_scalars)


class ScalarArgumentTest(WorkerTestCase):
    """A scalar argument of forward after the tensors (KernelBench 5's forward(A, s))."""

    def scaled(self, task, factor):
        a = inputs.generate("f32", [3, 5], 7, 0, "uniform").double()
        return inputs.raw_bytes((a * factor).float())

    def test_value_of_the_named_signature_scalar(self):
        # 3.0, not the 2.5 of get_inputs(): the value a native candidate is given.
        task = scalar_task(self.directory, [{"name": "s", "dtype": "f64", "value": 3.0}],
                           [{"source": "input", "index": 1, "name": "s"}])
        reply, data = self.run_request(task, self.load(task), "small")
        self.assertEqual(reply["verdict"], "ok", reply)
        self.assertEqual(data, self.scaled(task, 3.0))

    def test_value_carried_by_the_entry_of_a_family_rewrite(self):
        task = scalar_task(self.directory, [{"name": "eps", "dtype": "f64", "value": 1e-5}],
                           [{"source": "input", "index": 1, "value": 4.0, "dtype": "f64"}])
        reply, data = self.run_request(task, self.load(task), "small")
        self.assertEqual(reply["verdict"], "ok", reply)
        self.assertEqual(data, self.scaled(task, 4.0))

    def test_an_older_entry_takes_the_value_of_get_inputs(self):
        task = scalar_task(self.directory, [], [{"source": "input", "index": 1}])
        reply, data = self.run_request(task, self.load(task), "small")
        self.assertEqual(reply["verdict"], "ok", reply)
        self.assertEqual(data, self.scaled(task, 2.5))


class ProvideTest(WorkerTestCase):
    def problem_values(self, seed):
        """get_inputs() of masked_pick at rows 5, cols 9 right after torch.manual_seed(seed)."""
        module = load_problem(problem("masked_pick"), {"rows": 5, "cols": 9})
        torch.manual_seed(seed)
        return module.get_inputs()

    def test_files_hold_get_inputs_values_of_each_seed(self):
        task = masked_pick_task(self.directory)
        handle = self.load(task)
        reply = self.worker.request("provide", handle=handle, signature=task["signature"],
                                    workload=workload(task, "small"), seeds=[3, 2**64 - 1],
                                    dir=self.directory)
        self.assertTrue(reply["ok"], reply)
        self.assertEqual(reply["verdict"], "ok", reply)
        self.assertEqual(reply["bytes_written"], 2 * (5 * 9 + 5 * 8))
        for seed in (3, 2**64 - 1):
            _, mask, ids = self.problem_values(seed)
            with open(os.path.join(self.directory, "small.%d.1.bin" % seed), "rb") as f:
                self.assertEqual(f.read(), inputs.raw_bytes(mask))
            with open(os.path.join(self.directory, "small.%d.2.bin" % seed), "rb") as f:
                self.assertEqual(f.read(), inputs.raw_bytes(ids))
            # x is generated by kforge: no file for it.
            self.assertFalse(os.path.exists(os.path.join(self.directory, "small.%d.0.bin" % seed)))
        self.assertEqual([n for n in os.listdir(self.directory) if n.endswith(".partial")], [])

    def test_run_computes_with_the_provided_values(self):
        task = masked_pick_task(self.directory)
        handle = self.load(task)
        reply, data = self.run_request(task, handle, "small", seed=3)
        self.assertEqual(reply["verdict"], "ok", reply)
        _, mask, ids = self.problem_values(3)
        x = inputs.generate("f32", [5, 9], 3, 0, "uniform").double()
        picked = x.gather(1, ids.unsqueeze(1)).squeeze(1)
        expected = ((x * mask).sum(dim=1) + picked).float()
        self.assertEqual(data, inputs.raw_bytes(expected))

    def test_each_seed_calls_get_inputs_once(self):
        # At KernelBench sizes one get_inputs() call makes gigabytes on the host: a seed's
        # values are made once for the provided files and reused for its expected outputs.
        task_file = masked_pick_task(self.directory)
        task = reference.ReferenceTask(task_file["path"])
        signature = protocol.parse_signature(task_file["signature"])
        small = protocol.parse_workload(workload(task_file, "small"))
        plan = task.plan(signature, small)
        module = task.module("small")
        calls = []
        original = module.get_inputs

        def counted():
            calls.append(1)
            return original()

        module.get_inputs = counted
        first = {seed: task.provided_values(plan, "small", seed) for seed in (3, 5)}
        again = {seed: task.provided_values(plan, "small", seed) for seed in (3, 5)}
        self.assertEqual(len(calls), 2)
        for seed in (3, 5):
            _, mask, ids = self.problem_values(seed)
            self.assertTrue(torch.equal(again[seed][1], mask.reshape(-1)))
            self.assertTrue(torch.equal(again[seed][2], ids.reshape(-1)))
            self.assertIs(again[seed], first[seed])
        # Over the memory bound only the latest seed is kept: the other is made again.
        with mock.patch.object(reference, "_PROVIDED_KEEP_BYTES", 1):
            task.provided_values(plan, "small", 7)
            task.provided_values(plan, "small", 3)
        self.assertEqual(len(calls), 4)

    def test_a_missing_folder_is_refused(self):
        task = masked_pick_task(self.directory)
        handle = self.load(task)
        reply = self.worker.request("provide", handle=handle, signature=task["signature"],
                                    workload=workload(task, "small"), seeds=[1],
                                    dir=os.path.join(self.directory, "nope"))
        self.assertFalse(reply["ok"])
        self.assertIn("does not exist", reply["error"])


class LoadTest(WorkerTestCase):
    def test_changed_problem_file_fails_load(self):
        copy = os.path.join(self.directory, "softmax_copy.py")
        shutil.copy(problem("softmax_rows"), copy)
        task = write_task(self.directory, copy, [tensor("x", "input", ["n"])],
                          [{"source": "input", "index": 0}], {"w": ({"n": 4}, {}, [[4]])})
        with open(copy, "a") as f:
            f.write("\n# edited after derivation\n")
        reply = self.worker.request("load", path=task["path"])
        self.assertTrue(reply["ok"], reply)
        self.assertEqual(reply["verdict"], "wrong_signature")
        self.assertEqual(reply["handle"], -1)
        self.assertIn("changed since derivation", reply["message"])

    def test_missing_task_file_fails_load(self):
        reply = self.worker.request("load", path=os.path.join(self.directory, "none.json"))
        self.assertEqual(reply["verdict"], "wrong_signature")
        self.assertIn("none.json", reply["message"])


class HarnessErrorTest(WorkerTestCase):
    def test_malformed_requests_are_refused_and_the_worker_keeps_serving(self):
        for line in ("not json", "[1, 2]", '{"id": 40}', '{"cmd": "fly", "id": 41}',
                     '{"cmd": "run", "id": 42}', '{"cmd": "run", "id": 43, "handle": 9}'):
            reply = self.worker.send_line(line)
            self.assertIs(reply["ok"], False, line)
            self.assertTrue(reply["error"], line)
            self.assertEqual(reply["token"], self.worker.token)
        self.assertEqual(reply["id"], 43)
        self.assertIn("unknown worker command 'fly'", self.worker.send_line(
            '{"cmd": "fly", "id": 44}')["error"])
        task = softmax_task(self.directory)
        reply, data = self.run_request(task, self.load(task), "tail")
        self.assertEqual(reply["verdict"], "ok")
        bad = dict(workload(task, "tail"), dims={"rows": 5})
        reply = self.worker.request("run", handle=1, signature=task["signature"], workload=bad,
                                    output_path=self.output_file())
        self.assertIs(reply["ok"], False)
        self.assertIn("dimension 'cols' is not bound", reply["error"])



class UnloadTest(WorkerTestCase):
    def test_an_unloaded_task_is_gone_and_others_keep_running(self):
        task = softmax_task(self.directory)
        first, second = self.load(task), self.load(task)
        self.run_request(task, first, "tail")
        self.assertTrue(self.worker.request("unload", handle=first)["ok"])
        reply = self.worker.request("run", handle=first, signature=task["signature"],
                                    workload=workload(task, "tail"),
                                    output_path=self.output_file())
        self.assertIs(reply["ok"], False)
        self.assertIn("unknown kernel handle %d" % first, reply["error"])
        again = self.worker.request("unload", handle=first)
        self.assertIs(again["ok"], False)  # a second unload names the handle it does not know
        self.assertIn("unknown kernel handle", again["error"])
        reply, _ = self.run_request(task, second, "tail")
        self.assertEqual(reply["verdict"], "ok")
        missing = self.worker.request("unload")
        self.assertIs(missing["ok"], False)
        self.assertIn("unload needs field 'handle'", missing["error"])

    def test_unload_drops_the_tasks_compiled_modules_and_timed_inputs(self):
        from kforge_torch.worker import Worker
        from kforge_torch.device import Device
        worker = Worker(Device("cpu", 0))
        task = softmax_task(self.directory)
        handle = worker.load({"path": task["path"]})["handle"]
        kept = worker._tasks[handle]
        other = object()
        worker._compiled[(id(kept), "tail", 1)] = "compiled for the task"
        worker._compiled[(id(other), "tail", 1)] = "compiled for another task"
        worker._timing_cache.key, worker._timing_cache.sets = "k", ["sets"]
        self.assertEqual(worker.dispatch("unload", {"handle": handle}), {})
        self.assertNotIn(handle, worker._tasks)
        self.assertEqual(list(worker._compiled.values()), ["compiled for another task"])
        self.assertIsNone(worker._timing_cache.sets)


class ExitTest(unittest.TestCase):
    def test_shutdown_and_eof_exit_zero(self):
        worker = WorkerProcess("cpu")
        self.assertTrue(worker.request("hello")["ok"])
        self.assertTrue(worker.request("shutdown")["ok"])
        self.assertEqual(worker.close(), 0)
        self.assertEqual(WorkerProcess("cpu").close(), 0)

    def test_non_finite_doubles_travel_as_strings(self):
        self.assertEqual(protocol.encode_reply({"a": float("inf"), "b": [float("nan")],
                                                "c": -float("inf")}),
                         '{"a":"inf","b":["nan"],"c":"-inf"}')


class TimeTest(WorkerTestCase):
    def time_request(self, task, handle, name, **fields):
        reply = self.worker.request("time", handle=handle, signature=task["signature"],
                                    workload=workload(task, name), seed=4, **fields)
        self.assertTrue(reply["ok"], reply)
        return reply

    def test_checked_calls_are_refused(self):
        # The reference is trusted and never checked: a request that asks is a harness bug.
        task = linear_task(self.directory)
        handle = self.load(task)
        reply = self.worker.request("time", handle=handle, signature=task["signature"],
                                    workload=workload(task, "small"), seed=4,
                                    checks=[{"call": 0}], check_path=self.output_file())
        self.assertFalse(reply["ok"], reply)
        self.assertIn("checked calls", reply["error"])

    def test_time_follows_the_policy(self):
        task = linear_task(self.directory)
        handle = self.load(task)
        policy = {"warmup": 2, "min_repetitions": 6, "max_repetitions": 25,
                  "target_relative_noise": 0.0, "max_seconds": "inf"}
        reply = self.time_request(task, handle, "small", policy=policy)
        self.assertEqual(reply["verdict"], "ok", reply)
        self.assertEqual(reply["stop_reason"], "max_repetitions")
        self.assertEqual(len(reply["samples_ms"]), 25)
        self.assertEqual(len(reply["host_ms"]), 25)
        self.assertTrue(all(s > 0 for s in reply["samples_ms"]))
        self.assertEqual(reply["input_sets_used"], 2)
        self.assertFalse(reply["inputs_reused"])
        self.assertEqual(reply["checked"], [])
        self.assertGreater(reply["host_wall_ms"], 0)
        policy.update(target_relative_noise=1e9)
        again = self.time_request(task, handle, "small", policy=policy)
        self.assertTrue(again["inputs_reused"])
        self.assertEqual(again["stop_reason"], "noise")
        self.assertEqual(len(again["samples_ms"]), 6)

    def test_max_seconds_stops_after_the_minimum(self):
        task = softmax_task(self.directory)
        reply = self.time_request(task, self.load(task), "own", flush_l2=False, policy={
            "warmup": 0, "min_repetitions": 3, "max_repetitions": 100000,
            "target_relative_noise": 0.0, "max_seconds": 1e-6})
        self.assertEqual(reply["stop_reason"], "max_seconds")
        self.assertEqual(len(reply["samples_ms"]), 3)

    def test_a_fixed_length_request_past_its_limit_stops_at_max_repetitions(self):
        # Every call asked for ran (min = max, rung 1's rounds): not cut short by the limit.
        task = softmax_task(self.directory)
        reply = self.time_request(task, self.load(task), "own", flush_l2=False, policy={
            "warmup": 0, "min_repetitions": 3, "max_repetitions": 3,
            "target_relative_noise": 0.0, "max_seconds": 1e-6})
        self.assertEqual(reply["stop_reason"], "max_repetitions")
        self.assertEqual(len(reply["samples_ms"]), 3)

    def test_forward_that_raises_is_a_runtime_error(self):
        task = misbehaving_task(self.directory, "not_a_tensor")
        task = write_task(self.directory, problem("raises"), task["signature"]["tensors"],
                          task["torch"]["tensors"], {"w": ({"n": 12}, {}, [[12], [12]])})
        reply = self.time_request(task, self.load(task), "w")
        self.assertEqual(reply["verdict"], "runtime_error")
        self.assertIn("warm-up call 0", reply["message"])
        self.assertEqual(reply["samples_ms"], [])

    def test_bad_policy_is_refused(self):
        task = softmax_task(self.directory)
        reply = self.worker.request("time", handle=self.load(task), signature=task["signature"],
                                    workload=workload(task, "own"),
                                    policy={"min_repetitions": 5, "max_repetitions": 2})
        self.assertIs(reply["ok"], False)
        self.assertIn("min_repetitions <= max_repetitions", reply["error"])


@unittest.skipUnless(HAS_CUDA, "no CUDA device")
class CudaTest(WorkerTestCase):
    backend = "cuda"

    def test_hello_names_the_gpu(self):
        self.assertEqual(self.hello["backend"], "cuda")
        self.assertEqual(self.hello["name"], torch.cuda.get_device_name(0))
        self.assertRegex(self.hello["compute_capability"], r"^\d+\.\d+$")
        self.assertGreater(self.worker.request("hello", measure=True)["copy_bytes_per_s"], 1e9)

    def test_run_and_time_on_the_gpu(self):
        task = linear_task(self.directory)
        handle = self.load(task)
        reply, data = self.run_request(task, handle, "small", seed=9, calls=2)
        self.assertEqual(reply["verdict"], "ok", reply)
        expected = expected_bytes(task, "small", 9, device="cuda")
        self.assertEqual(data, expected + expected)
        on_host = torch.frombuffer(bytearray(expected_bytes(task, "small", 9)), dtype=torch.float32)
        got = torch.frombuffer(bytearray(data[:len(expected)]), dtype=torch.float32)
        self.assertTrue(torch.allclose(got, on_host, rtol=1e-6, atol=1e-7))
        reply = self.worker.request("time", handle=handle, signature=task["signature"],
                                    workload=workload(task, "small"), seed=1,
                                    policy={"min_repetitions": 5, "max_repetitions": 20})
        self.assertEqual(reply["verdict"], "ok", reply)
        self.assertGreaterEqual(len(reply["samples_ms"]), 5)


class NoGpuTest(unittest.TestCase):
    @unittest.skipIf(HAS_CUDA, "a CUDA device is present")
    def test_cuda_backend_without_a_gpu_exits_1_saying_why(self):
        worker = WorkerProcess("cuda")
        try:
            self.assertEqual(worker.process.wait(60), 1)
            self.assertIn("no CUDA device", worker.stderr_text())
        finally:
            worker.close()

    def test_bad_command_line_exits_2(self):
        worker = WorkerProcess("tpu")
        try:
            self.assertEqual(worker.process.wait(60), 2)
        finally:
            worker.close()


if __name__ == "__main__":
    unittest.main()
