// Honest (split precision): the 3xTF32 scheme of tensor-core GEMMs at fp32 accuracy, emulated on
// the cpu. Each input is split as a = a_hi + a_lo with a_hi = tf32(a), a_lo = tf32(a - a_hi), and
// a*b ~ a_hi*b_hi + a_hi*b_lo + a_lo*b_hi (the a_lo*b_lo term, ~2^-22 relative, dropped), each
// TF32 product exact in fp32, accumulated in fp32 (NVIDIA CUTLASS's 3xTF32; Ootomo and Yokota,
// IJHPCA 2022). Its error is about that of a plain fp32 computation: the precision rule passes it.
#include <kforge/kernel.h>

#include <cstdint>
#include <cstring>

namespace {

float to_tf32(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  if ((bits & 0x7f800000u) != 0x7f800000u) bits += 0x0fffu + ((bits >> 13) & 1u);
  bits &= 0xffffe000u;
  std::memcpy(&v, &bits, sizeof bits);
  return v;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 3 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const int64_t m_size = x.shape[0], k_size = x.shape[1], n_size = w.shape[0];
  const float* xp = static_cast<const float*>(x.data);
  const float* wp = static_cast<const float*>(w.data);
  const float* bp = static_cast<const float*>(args->inputs[2].data);
  float* yp = static_cast<float*>(args->outputs[0].data);
  const float divisor = static_cast<float>(args->scalars[0]);
#pragma omp parallel for
  for (int64_t m = 0; m < m_size; ++m) {
    for (int64_t n = 0; n < n_size; ++n) {
      float sum = 0.0f;
      for (int64_t k = 0; k < k_size; ++k) {
        const float a = xp[m * k_size + k], b = wp[n * k_size + k];
        const float a_hi = to_tf32(a), b_hi = to_tf32(b);
        const float a_lo = to_tf32(a - a_hi), b_lo = to_tf32(b - b_hi);
        sum += a_hi * b_lo + a_lo * b_hi + a_hi * b_hi;  // small terms first
      }
      const float v = sum + bp[n];
      yp[m * n_size + n] = (v < 0.0f ? 0.0f : v) / divisor;
    }
  }
  return 0;
}
