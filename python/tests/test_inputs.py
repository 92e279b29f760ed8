"""kforge_torch.inputs against direct ctypes calls of libkforge_inputs.so.

Needs the library: $KFORGE_INPUTS_LIB (or $KFORGE_BIN_DIR). Without it these tests fail, with a
message saying where the library was looked for (CI builds it: CMake target kforge_inputs).
"""

import ctypes
import os
import unittest
from unittest import mock

import numpy as np
import torch

from kforge_torch import inputs

NUMPY_RAW = {"f32": np.uint32, "f64": np.uint64, "f16": np.uint16, "bf16": np.uint16,
             "i32": np.uint32, "i64": np.uint64, "bool": np.uint8}


def setUpModule():
    # Fail (never skip) when the library is absent: the message names where it was looked for.
    inputs.load_library()


def direct_fill(dtype, elements, seed, tensor_index, distribution):
    """The library's bytes for these arguments, through our own ctypes call (not inputs.py)."""
    lib = ctypes.CDLL(inputs.library_path())
    out = np.zeros(elements, dtype=NUMPY_RAW[dtype])
    status = lib.kforge_fill_input_host(
        ctypes.c_void_p(out.ctypes.data), ctypes.c_int64(elements),
        ctypes.c_int(inputs.DTYPE_NUMBERS[dtype]), ctypes.c_uint64(seed),
        ctypes.c_int(tensor_index), ctypes.c_int(inputs.DISTRIBUTION_NUMBERS[distribution]))
    if status != 0:
        raise AssertionError("kforge_fill_input_host returned %d" % status)
    return out.tobytes()


class GenerateTest(unittest.TestCase):
    def test_every_dtype_and_distribution_matches_the_library_bit_for_bit(self):
        for dtype in inputs.DTYPE_NUMBERS:
            for distribution in inputs.DISTRIBUTION_NUMBERS:
                with self.subTest(dtype=dtype, distribution=distribution):
                    tensor = inputs.generate(dtype, [7, 13], 1234, 2, distribution)
                    self.assertEqual(tensor.dtype, inputs.TORCH_DTYPES[dtype])
                    self.assertEqual(list(tensor.shape), [7, 13])
                    self.assertEqual(inputs.raw_bytes(tensor),
                                     direct_fill(dtype, 91, 1234, 2, distribution))

    def test_bf16_has_two_byte_elements(self):
        tensor = inputs.generate("bf16", [5, 3], 9, 0, "normal")
        self.assertEqual(tensor.element_size(), 2)
        self.assertEqual(len(inputs.raw_bytes(tensor)), 30)
        self.assertTrue(torch.isfinite(tensor.float()).all())

    def test_large_tensor_matches(self):
        # Large enough that the library fills it on several threads.
        tensor = inputs.generate("f32", [1 << 20], 77, 1, "uniform")
        self.assertEqual(inputs.raw_bytes(tensor), direct_fill("f32", 1 << 20, 77, 1, "uniform"))

    def test_seed_and_tensor_index_change_the_values(self):
        base = inputs.generate("f32", [64], 1, 0, "uniform")
        self.assertFalse(torch.equal(base, inputs.generate("f32", [64], 2, 0, "uniform")))
        self.assertFalse(torch.equal(base, inputs.generate("f32", [64], 1, 1, "uniform")))
        self.assertTrue(torch.equal(base, inputs.generate("f32", [64], 1, 0, "uniform")))

    def test_empty_tensor(self):
        self.assertEqual(inputs.generate("f64", [0, 4], 1, 0, "uniform").numel(), 0)

    def test_remaps_repeat_elements_of_the_plain_tensor(self):
        # The self-test probes: every 16th element, and the last rows repeating the first ones.
        plain = inputs.generate("f32", [5, 40], 9, 1, "pareto").flatten()
        every = inputs.generate("f32", [5, 40], 9, 1, "pareto", remap="every_16th",
                                rows=5).flatten()
        half = inputs.generate("f32", [5, 40], 9, 1, "pareto", remap="half_rows",
                               rows=5).view(5, 40)
        index = torch.arange(200)
        self.assertTrue(torch.equal(inputs.bit_view(every),
                                    inputs.bit_view(plain[index - index % 16])))
        rows = plain.view(5, 40)
        self.assertTrue(torch.equal(inputs.bit_view(half[:3]), inputs.bit_view(rows[:3])))
        self.assertTrue(torch.equal(inputs.bit_view(half[3:]), inputs.bit_view(rows[:2])))
        with self.assertRaisesRegex(ValueError, "unknown input remap 'strided'"):
            inputs.generate("f32", [4], 1, 0, "uniform", remap="strided")
        with self.assertRaisesRegex(inputs.InputsLibraryError, "half_rows"):
            inputs.generate("f32", [10], 1, 0, "uniform", remap="half_rows", rows=3)

    def test_unknown_dtype_or_distribution_is_a_value_error(self):
        with self.assertRaisesRegex(ValueError, "unknown dtype 'f8'"):
            inputs.generate("f8", [4], 1, 0, "uniform")
        with self.assertRaisesRegex(ValueError, "unknown input distribution 'cauchy'"):
            inputs.generate("f32", [4], 1, 0, "cauchy")

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
    def test_cuda_matches_host(self):
        for dtype in inputs.DTYPE_NUMBERS:
            with self.subTest(dtype=dtype):
                on_device = inputs.generate(dtype, [33, 65], 5, 3, "heavy_tailed", "cuda")
                self.assertEqual(on_device.device.type, "cuda")
                self.assertEqual(inputs.raw_bytes(on_device),
                                 direct_fill(dtype, 33 * 65, 5, 3, "heavy_tailed"))


class WriteRawTest(unittest.TestCase):
    """write_raw writes what raw_bytes returns, a chunk at a time for device tensors."""

    def written(self, tensor):
        import io
        out = io.BytesIO()
        inputs.write_raw(tensor, out)
        return out.getvalue()

    def tensors(self, device):
        made = [inputs.generate(dtype, [33, 65], 5, 3, "normal", device)
                for dtype in inputs.DTYPE_NUMBERS]
        base = inputs.generate("f32", [40, 30], 1, 0, "uniform", device)
        made.append(base.t())  # not contiguous
        made.append(base[:0])  # empty
        return made

    def test_host_tensors_match_raw_bytes(self):
        for tensor in self.tensors("cpu"):
            with self.subTest(dtype=tensor.dtype, shape=tuple(tensor.shape)):
                self.assertEqual(self.written(tensor), inputs.raw_bytes(tensor))

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
    def test_device_tensors_match_raw_bytes_across_chunks(self):
        # A chunk smaller than a tensor, and not a multiple of its element size: every byte
        # still lands once, in order.
        with mock.patch.object(inputs, "WRITE_CHUNK_BYTES", 1000):
            for tensor in self.tensors("cuda"):
                with self.subTest(dtype=tensor.dtype, shape=tuple(tensor.shape)):
                    self.assertEqual(self.written(tensor), inputs.raw_bytes(tensor))


class LibraryLookupTest(unittest.TestCase):
    def setUp(self):
        self.real_path = inputs.library_path()
        self.saved = inputs._library
        inputs._library = None

    def tearDown(self):
        inputs._library = self.saved

    def test_missing_library_names_where_it_looked(self):
        with mock.patch.dict(os.environ, {"KFORGE_INPUTS_LIB": "/nonexistent/libkforge_inputs.so"}):
            with self.assertRaisesRegex(inputs.InputsLibraryError,
                                        "/nonexistent/libkforge_inputs.so.*KFORGE_INPUTS_LIB"):
                inputs.load_library()

    def test_no_variable_set_names_both(self):
        environment = {k: v for k, v in os.environ.items()
                       if k not in ("KFORGE_INPUTS_LIB", "KFORGE_BIN_DIR")}
        with mock.patch.dict(os.environ, environment, clear=True):
            with self.assertRaisesRegex(inputs.InputsLibraryError,
                                        "KFORGE_INPUTS_LIB.*KFORGE_BIN_DIR"):
                inputs.load_library()

    def test_found_next_to_the_kforge_binary(self):
        environment = {k: v for k, v in os.environ.items() if k != "KFORGE_INPUTS_LIB"}
        environment["KFORGE_BIN_DIR"] = os.path.dirname(self.real_path)
        with mock.patch.dict(os.environ, environment, clear=True):
            self.assertEqual(inputs.library_path(), self.real_path)
            self.assertIsNotNone(inputs.load_library())


if __name__ == "__main__":
    unittest.main()
