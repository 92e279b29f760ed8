// The masked row sum plus the picked entry of python/tests/problems/masked_pick.py, on the cpu
// backend. KF_IGNORE_MASK / KF_IGNORE_IDS build the wrong versions the test expects to fail: a
// kernel that assumes an all-true mask, or class id 0 everywhere.
#include <kforge/kernel.h>

#include <cstdint>

extern "C" int kforge_run(const kforge_args* args) {
  const DLTensor& x = args->inputs[0];
  const DLTensor& mask = args->inputs[1];
  const DLTensor& ids = args->inputs[2];
  const DLTensor& y = args->outputs[0];
  if (mask.dtype.code != kDLUInt || mask.dtype.bits != 8 || ids.dtype.bits != 64) return 2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const auto* xs = static_cast<const float*>(x.data);
  const auto* ms = static_cast<const uint8_t*>(mask.data);
  const auto* is = static_cast<const int64_t*>(ids.data);
  auto* out = static_cast<float*>(y.data);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
#ifdef KF_IGNORE_MASK
      sum += xs[r * cols + c];
#else
      if (ms[r * cols + c] != 0) sum += xs[r * cols + c];
#endif
    }
#ifdef KF_IGNORE_IDS
    const int64_t id = 0;
#else
    const int64_t id = is[r];
    if (id < 0 || id >= cols) return 3;
#endif
    out[r] = static_cast<float>(sum + xs[r * cols + id]);
  }
  return 0;
}
