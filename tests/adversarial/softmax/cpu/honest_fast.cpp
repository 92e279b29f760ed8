// HONEST (must pass: ok). A fast softmax: rows spread over OpenMP threads, every pass an
// `omp simd` loop (max and sum as simd reductions), fp32, max-subtracted, with a branch-free
// polynomial exp (Cephes expf, ~1 ulp) that vectorizes where a libm call would not.
#include <kforge/kernel.h>

#include <cstdint>
#include <cstring>

namespace {

inline __attribute__((always_inline)) float poly_exp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float t = x * 1.44269504088896341f + 12582912.0f;  // 1.5 * 2^23: round to integer
  const float n = t - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  int32_t bits;
  std::memcpy(&bits, &t, 4);
  bits = (bits - 0x4B400000 + 127) << 23;  // 2^n
  float scale;
  std::memcpy(&scale, &bits, 4);
  return e * scale;
}

void softmax_row(const float* __restrict__ xr, float* __restrict__ yr, int64_t cols) {
  float m = xr[0];
#pragma omp simd reduction(max : m)
  for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < cols; ++c) {
    const float e = poly_exp(xr[c] - m);
    yr[c] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (y.shape[0] != rows || y.shape[1] != cols) return -2;
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);

#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) softmax_row(xp + r * cols, yp + r * cols, cols);
  return 0;
}
