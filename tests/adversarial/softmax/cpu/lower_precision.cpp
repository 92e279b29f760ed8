// TRICK lower_precision (must fail: wrong_answer). Emulates a bf16 kernel: every intermediate
// (x - m, exp, the running sum, the final product) is rounded to bfloat16 (8-bit mantissa,
// ~0.4% per rounding), which on a GPU would double throughput. Looks plausible on short rows
// but is far outside an fp32 tolerance: relative errors of ~1e-2 per element, and the bf16
// running sum stalls once it is large (adding 0.4 to 256 rounds to no change). Caught by the
// element-wise relative tolerance (rtol = 1e-4).
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

// Round to the nearest bfloat16 (ties to even) and widen back to float.
float bf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  bits &= 0xFFFF0000u;
  std::memcpy(&v, &bits, 4);
  return v;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);

  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xp + r * cols;
    float* yr = yp + r * cols;
    float m = bf16(xr[0]);
    for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, bf16(xr[c]));
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum = bf16(sum + bf16(std::exp(bf16(bf16(xr[c]) - m))));
    const float inv = bf16(1.0f / sum);
    for (int64_t c = 0; c < cols; ++c) yr[c] = bf16(bf16(std::exp(bf16(bf16(xr[c]) - m))) * inv);
  }
  return 0;
}
