"""The Triton softmax variant split_row (kernels/triton/softmax/split_row.py), its own text with
its knobs written above it as the templates generator writes them, run on the CPU stand-in of
Triton (tests/triton_stand_in.py: one thread per program, at most `resident` at once): the
results against torch.softmax, rows of -inf, the ticket argument with exactly SPLIT programs
resident, and the refusals. Memory ordering and the real compiler are the GPU check's
(tests/gpu_triton_softmax_split_row.py).
"""
import sys
import types
import unittest
from unittest import mock

import torch

from tests.solution_fixtures import ROOT
from tests.triton_stand_in import triton_module

SOURCE = ROOT / "kernels" / "triton" / "softmax" / "split_row.py"


def split_row(chunk: int, resident: int, timeout_s: float = 60.0):
    """The variant module at CHUNK = `chunk` on a stand-in device holding `resident` programs."""
    text = (f"# kernels/triton/softmax/split_row.py at test\nKF_BLOCK_THREADS = 128\n"
            f"KF_CHUNK = {chunk}\n" + SOURCE.read_text())
    triton = triton_module(resident, timeout_s)
    module = types.ModuleType("kf_split_row")
    with mock.patch.dict(sys.modules, {"triton": triton, "triton.language": triton.language}):
        exec(compile(text, str(SOURCE), "exec"), module.__dict__)
    return module


def run(module, x: torch.Tensor, multiprocessors: int) -> torch.Tensor:
    y = torch.empty_like(x)
    properties = types.SimpleNamespace(multi_processor_count=multiprocessors)
    with mock.patch.object(torch.cuda, "get_device_properties", return_value=properties):
        module.kforge_run((x,), (y,), ())
    return y


def expected(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


class SplitRowTest(unittest.TestCase):
    def test_rows_split_over_programs_match_softmax(self):
        torch.manual_seed(5)
        module = split_row(chunk=256, resident=4)
        for rows, cols in ((3, 1000), (1, 1), (2, 256), (5, 257)):
            x = torch.randn(rows, cols) * 4
            torch.testing.assert_close(run(module, x, 4), expected(x), atol=1e-6, rtol=1e-5)

    def test_exactly_split_resident_programs_make_progress(self):
        # 6 rows of 4 chunks, 4 programs at a time: whichever start first, tickets keep each
        # row's chunks on running programs.
        torch.manual_seed(6)
        x = torch.randn(6, 1000)
        y = run(split_row(chunk=256, resident=4), x, 4)
        torch.testing.assert_close(y, expected(x), atol=1e-6, rtol=1e-5)

    def test_fewer_resident_programs_than_split_would_wait_forever(self):
        # Why kforge_run refuses SPLIT above the multiprocessor count: with 3 programs resident
        # and 4 chunks a row, the first three hold row 0's first tickets and wait for the fourth.
        module = split_row(chunk=256, resident=3, timeout_s=2.0)
        with self.assertRaisesRegex(TimeoutError, "unfinished after 2.0 s with 3 resident"):
            run(module, torch.randn(2, 1000), multiprocessors=4)

    def test_rows_of_minus_infinity(self):
        torch.manual_seed(7)
        x = torch.randn(4, 1000)
        x[0] = float("-inf")
        x[0, 777] = 2.0
        x[1, :300] = float("-inf")  # chunks 0 and 1 of 128 columns hold only -inf
        x[2] -= 200.0  # exp(m_chunk - M) of an all -inf chunk must not overflow
        x[2, :128] = float("-inf")
        y = run(split_row(chunk=128, resident=8), x, 8)
        torch.testing.assert_close(y[:3], expected(x)[:3], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(y[3], expected(x)[3], atol=1e-6, rtol=1e-5)
        everything_minus_infinity = torch.full((1, 300), float("-inf"))
        y = run(split_row(chunk=128, resident=8), everything_minus_infinity, 8)
        self.assertTrue(y.isnan().all(), "torch.softmax gives NaN for a row of only -inf")

    def test_half_types_are_computed_in_float32(self):
        torch.manual_seed(8)
        for dtype in (torch.float16, torch.bfloat16):
            x = (torch.randn(3, 700) * 3).to(dtype)
            y = run(split_row(chunk=256, resident=3), x, 3)
            self.assertEqual(y.dtype, dtype)
            torch.testing.assert_close(y.float(), expected(x).float(), atol=1e-2, rtol=1e-2)

    def test_empty_shapes_return_and_bad_shapes_are_refused(self):
        module = split_row(chunk=256, resident=4)
        self.assertEqual(run(module, torch.empty(0, 5), 4).shape, (0, 5))
        with self.assertRaisesRegex(ValueError, r"expected x and y \[rows, cols\]"):
            module.kforge_run((torch.randn(2, 3, 4),), (torch.empty(2, 3, 4),), ())
        with self.assertRaisesRegex(ValueError, "unit-stride"):
            x = torch.randn(8, 6).t()
            module.kforge_run((x,), (torch.empty_like(x),), ())

    def test_a_row_needing_more_programs_than_multiprocessors_is_refused(self):
        module = split_row(chunk=256, resident=4)
        with self.assertRaisesRegex(ValueError, "need 5 programs of CHUNK 256 columns at once, "
                                                "more than the 4 multiprocessors"):
            run(module, torch.randn(2, 1025), 4)


if __name__ == "__main__":
    unittest.main()
