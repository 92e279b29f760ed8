"""Tests of the batch derivation (python/kforge_torch/derive_batch.py): several problem files in
one Python process, each isolated in its own forked child, with a per-problem time limit.

Run from the worktree root: /usr/bin/python3 -m unittest discover -s python/tests -t python
"""
import contextlib
import io
import json
import os
import pathlib
import subprocess
import sys
import time
import unittest

from kforge_torch import allocator, derive_batch, derive_cli

PROBLEMS = pathlib.Path(__file__).resolve().parent / "problems"
ROOT = PROBLEMS.parents[2]


def run_derive(*arguments, timeout_s=300):
    """`python3 -m kforge_torch derive ARGUMENTS` as the orchestrator runs it: (exit code,
    stdout, stderr)."""
    environment = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    result = subprocess.run([sys.executable, "-m", "kforge_torch", "derive", *arguments],
                            capture_output=True, text=True, env=environment, timeout=timeout_s)
    return result.returncode, result.stdout, result.stderr


def lines_of(stdout):
    """The batch's JSON lines; fails the test on anything that is not one."""
    return [json.loads(line) for line in stdout.splitlines()]


class BatchDeriveTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # One batch serves most tests: a problem that changes process-wide state first, then the
        # problems it could spoil, a broken file, one that hangs and one that exits the process.
        cls.files = [PROBLEMS / name for name in (
            "leaks_settings.py", "softmax_rows.py", "bad_syntax.py", "hangs_in_forward.py",
            "exits_in_forward.py", "two_outputs.py")]
        cls.limit_s = 6.0
        start = time.perf_counter()
        cls.code, cls.stdout, cls.stderr = run_derive(
            "--time-limit-s", str(cls.limit_s), *map(str, cls.files))
        cls.elapsed_s = time.perf_counter() - start
        cls.lines = lines_of(cls.stdout)

    def line(self, name):
        return next(line for line in self.lines if line["file"] == str(PROBLEMS / name))

    def test_every_file_has_its_line_in_order_and_stdout_is_only_json(self):
        self.assertEqual(self.code, 0, self.stderr)
        self.assertEqual([line["file"] for line in self.lines], [str(f) for f in self.files])
        for line in self.lines:
            # cpu_s comes from the child: a child killed or dead before its result has none.
            expected = {"file", "ok", "seconds", "task" if line["ok"] else "error"}
            self.assertEqual(set(line) - {"cpu_s"}, expected, line)
        # What the problem printed went to stderr, from Python and from the descriptor alike.
        self.assertIn("leaks_settings: a print on stdout", self.stderr)
        self.assertIn("leaks_settings: a write to file descriptor 1", self.stderr)

    def test_a_broken_file_is_its_own_error(self):
        line = self.line("bad_syntax.py")
        self.assertFalse(line["ok"])
        self.assertTrue(line["error"].startswith(f"{PROBLEMS / 'bad_syntax.py'}: line "),
                        line["error"])
        self.assertIn("syntax error", line["error"])

    def test_a_problem_that_hangs_is_stopped_at_the_limit_and_the_next_ones_derive(self):
        line = self.line("hangs_in_forward.py")
        self.assertFalse(line["ok"])
        self.assertIn("did not finish in 6 s", line["error"])
        self.assertGreaterEqual(line["seconds"], self.limit_s)
        self.assertLess(line["seconds"], self.limit_s + 5)
        self.assertTrue(self.line("two_outputs.py")["ok"])
        # The whole batch took about one limit, not the problems' sum of anything larger.
        self.assertLess(self.elapsed_s, self.limit_s + 60)

    def test_a_problem_that_exits_the_process_is_its_own_error(self):
        line = self.line("exits_in_forward.py")
        self.assertFalse(line["ok"])
        self.assertIn("ended without a result (exit code 7)", line["error"])
        self.assertTrue(self.line("two_outputs.py")["ok"])

    def test_nothing_of_a_problem_leaks_into_the_next(self):
        # leaks_settings.py set the default dtype to float64 and replaced torch.softmax by a
        # function that returns zeros: softmax_rows.py, derived after it in the same batch, must
        # derive exactly as it does alone (float32, the softmax family).
        leaky = self.line("leaks_settings.py")
        self.assertTrue(leaky["ok"], leaky.get("error"))
        self.assertEqual(leaky["task"]["signature"]["tensors"][0]["dtype"], "f64")
        after = self.line("softmax_rows.py")
        self.assertTrue(after["ok"], after.get("error"))
        self.assertEqual(after["task"]["family"], "softmax")
        self.assertEqual(after["task"]["signature"]["tensors"][0]["dtype"], "f32")
        code, stdout, stderr = run_derive("--batch", str(PROBLEMS / "softmax_rows.py"))
        self.assertEqual(code, 0, stderr)
        alone = lines_of(stdout)
        self.assertEqual(len(alone), 1)
        self.assertEqual(alone[0]["task"], after["task"])


class BatchSameAsSingleTest(unittest.TestCase):
    def test_batch_task_is_the_single_file_derivation(self):
        path = str(PROBLEMS / "two_outputs.py")
        code, single, stderr = run_derive(path)
        self.assertEqual(code, 0, stderr)
        code, batch, stderr = run_derive("--batch", path)
        self.assertEqual(code, 0, stderr)
        self.assertEqual(lines_of(batch)[0]["task"], json.loads(single))


class AllocatorTest(unittest.TestCase):
    @unittest.skipUnless(sys.platform.startswith("linux"), "glibc's mallopt")
    def test_glibc_takes_the_thresholds(self):
        # A value past glibc's maximum (32 MiB mmap threshold on 64-bit) would be refused.
        self.assertTrue(allocator.reuse_freed_memory())


class BatchInProcessTest(unittest.TestCase):
    def test_run_batch_writes_one_line_per_file_to_a_stream(self):
        out = io.StringIO()
        with contextlib.redirect_stderr(io.StringIO()):
            code = derive_batch.run_batch(
                [str(PROBLEMS / "bad_not_a_problem.py"), str(PROBLEMS / "softmax_rows.py")],
                {"capacity_check": False}, 60.0, out)
        self.assertEqual(code, 0)
        first, second = lines_of(out.getvalue())
        self.assertFalse(first["ok"])
        self.assertIn("expected a class Model", first["error"])
        self.assertEqual(second["task"]["family"], "softmax")

    def test_preload_starts_no_thread_and_survives_a_torch_without_meta(self):
        # The parent forks after preload(): a thread started there (an OpenMP pool) would leave
        # its locks held in every child. Threads torch starts at import are there before.
        threads_before = len(os.listdir("/proc/self/task"))
        derive_batch.preload()
        self.assertEqual(len(os.listdir("/proc/self/task")), threads_before)
        import torch
        real_empty = torch.empty

        def no_meta(*args, **kwargs):
            raise RuntimeError("no meta device in this torch")
        torch.empty = no_meta
        try:
            derive_batch.preload()  # a warm-up only: nothing to raise
        finally:
            torch.empty = real_empty

    def test_bad_batch_command_lines_exit_2(self):
        two = [str(PROBLEMS / "softmax_rows.py"), str(PROBLEMS / "two_outputs.py")]
        with contextlib.redirect_stderr(io.StringIO()) as stderr:
            self.assertEqual(derive_cli.main([*two, "-o", "out.json"]), 2)
            self.assertEqual(derive_cli.main(["--batch", *two, "--time-limit-s", "0"]), 2)
        self.assertIn("-o takes one file", stderr.getvalue())
        self.assertIn("--time-limit-s: expected seconds > 0", stderr.getvalue())


if __name__ == "__main__":
    unittest.main()
