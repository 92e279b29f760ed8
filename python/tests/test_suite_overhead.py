"""bench/torch's suite-overhead tools (issue 18): the split of a suite's time by
ingest_bench.analyze, and the problem files suite_problems.py writes."""
import importlib.util
import json
import pathlib
import tempfile
import unittest

import torch

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "torch"


def load(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class AnalyzeTest(unittest.TestCase):
    def test_a_suite_splits_into_evaluation_and_the_rest(self):
        ingest_bench = load("ingest_bench")
        with tempfile.TemporaryDirectory() as tmp:
            suite = pathlib.Path(tmp)
            run = suite / "served"
            run.mkdir()
            (suite / "derived").mkdir()
            (suite / "checks").mkdir()
            (suite / "derived" / "derivation.json").write_text(json.dumps({"batch_wall_s": 2.0}))
            # A run of 20 s: prepare 4 (of which 1.5 the workers' start), compile waits 1,
            # search 10 (the workers 9 of it), final 4, profile 1; 1 s before its budget clock.
            (run / "result.json").write_text(json.dumps({
                "wall_s": 20.0, "startup_s": 1.0,
                "phases_s": {"prepare": 4.0, "compile_wait": 1.0, "search": 10.0, "final": 4.0,
                             "profile": 1.0},
                "budget": {"spent": {"wall_s": 20.0, "device_s": 9.0}}}))
            (run / "events.jsonl").write_text(json.dumps({
                "event": "task_prepared", "seconds": 3.0, "time": "2026-12-06T10:00:00Z",
                "phases": {"workers": 1.5, "gate_outputs": 1.5}}) + "\n")
            (suite / "checks" / "unserved.json").write_text(json.dumps({
                "wall_s": 3.5, "phases": {"workers": 1.0, "gate_outputs": 0.5},
                "samples_ms": [100.0] * 4}))
            (suite / "suite.json").write_text(json.dumps({"tasks": [
                {"name": "served", "status": "correct", "wall_s": 21.5, "run_dir": str(run)},
                {"name": "unserved", "status": "error", "wall_s": 4.0, "run_dir": "",
                 "reference_check": "ran"},
                {"name": "broken", "status": "error", "wall_s": 0.5, "run_dir": ""}]}))
            record = ingest_bench.analyze({"total_wall_s": 30.0}, suite)
        s = record["seconds"]
        self.assertAlmostEqual(s["prepare"], 2.5)          # 4 less the workers' 1.5
        self.assertAlmostEqual(s["child_start"], 1.0 + 1.5 + 0.5)  # + the broken child's 0.5
        self.assertAlmostEqual(s["child_end"], 0.5)        # 21.5 - 20 - 1
        self.assertAlmostEqual(s["candidates"], 9.0)
        self.assertAlmostEqual(s["search_bookkeeping"], 1.0)
        self.assertAlmostEqual(s["reference_check_work"], 2.5)  # its 3.5 s less the workers' 1
        self.assertAlmostEqual(s["reference_check_process"], 1.5)
        self.assertAlmostEqual(s["derivation"], 2.0)
        self.assertAlmostEqual(sum(s.values()), 30.0)
        outside = 2.0 + 3.0 + 0.5 + 1.0 + 1.5 + s["suite_own"]
        self.assertAlmostEqual(record["outside_evaluation_s"], outside, places=3)
        self.assertAlmostEqual(record["outside_evaluation_fraction"], outside / 30.0, places=3)


class SuiteProblemsTest(unittest.TestCase):
    def test_the_files_are_problems_and_the_same_seed_writes_the_same(self):
        suite_problems = load("suite_problems")
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            first = suite_problems.write_suite(pathlib.Path(a), 16, "cpu", 0.75, 3)
            again = suite_problems.write_suite(pathlib.Path(b), 16, "cpu", 0.75, 3)
            self.assertEqual(len(first), 16)
            self.assertEqual([p.read_text() for p in first], [p.read_text() for p in again])
            self.assertEqual(sum("sum" in p.name or "argmax" in p.name or "cumsum" in p.name or
                                 "sigmoid" in p.name for p in first), 4)  # 16 - 12 served
            for path in first:
                spec = importlib.util.spec_from_file_location(path.stem, path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                model = module.Model(*module.get_init_inputs())
                out = model(*module.get_inputs())
                self.assertIsInstance(out, torch.Tensor, path.name)


if __name__ == "__main__":
    unittest.main()
