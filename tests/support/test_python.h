// The Python interpreter the tests hand kforge as KFORGE_PYTHON.
#pragma once

#include <string>

namespace kforge::testing {

/// The first of $KFORGE_PYTHON, the Python found at configure time (KFORGE_TEST_PYTHON) and
/// `python3` that can import torch; KFORGE_TEST_PYTHON when none can (a test that needs torch
/// then fails with kforge's own message). Binaries built on Debian run on the GPU machine, where
/// the configure-time /usr/bin/python3 has no torch and `python3` has PyTorch 2.x: a GPU test
/// there sets KFORGE_PYTHON or finds `python3`. Probed once per process (about 1 s a probe).
const std::string& test_python();

}  // namespace kforge::testing
