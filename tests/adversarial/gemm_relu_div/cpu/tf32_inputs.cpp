// Cheat (reduced precision): what a TF32 tensor-core GEMM computes, emulated on the cpu. Every
// input is rounded to TF32 (10 mantissa bits, round to nearest even) before an exact product and
// fp32 accumulation, as mma.sync .tf32 does. Its error is ~2^-11 relative per product, hundreds of
// times an fp32 computation's, yet within KernelBench's 1e-2 tolerance on these sizes: only the
// fp32 precision rule rejects it.
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
        sum += to_tf32(xp[m * k_size + k]) * to_tf32(wp[n * k_size + k]);
      }
      const float v = sum + bp[n];
      yp[m * n_size + n] = (v < 0.0f ? 0.0f : v) / divisor;
    }
  }
  return 0;
}
