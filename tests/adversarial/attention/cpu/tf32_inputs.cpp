// Cheat (reduced precision): what TF32 tensor cores make of attention, emulated on the cpu. Q, K,
// the weights P and V are rounded to TF32 (10 mantissa bits, round to nearest even) before exact
// products and fp32 accumulation, as mma.sync .tf32 does for S = Q K^T and O = P V. Its error is
// hundreds of times an fp32 computation's, yet within KernelBench's 1e-2 tolerance: only the
// fp32 precision rule rejects it.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

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
  if (args->num_inputs != 3 || args->num_outputs != 1) return -1;
  const DLTensor& q = args->inputs[0];
  const int64_t b_size = q.shape[0], s = q.shape[1], d = q.shape[2];
  const float* qp = static_cast<const float*>(q.data);
  const float* kp = static_cast<const float*>(args->inputs[1].data);
  const float* vp = static_cast<const float*>(args->inputs[2].data);
  float* op = static_cast<float*>(args->outputs[0].data);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
#pragma omp parallel for
  for (int64_t row = 0; row < b_size * s; ++row) {
    const int64_t base = row / s * s * d;
    std::vector<float> p(static_cast<size_t>(s));
    float row_max = -INFINITY;
    for (int64_t j = 0; j < s; ++j) {
      float dot = 0.0f;
      for (int64_t c = 0; c < d; ++c) dot += to_tf32(qp[row * d + c]) * to_tf32(kp[base + j * d + c]);
      p[j] = dot * scale;
      row_max = p[j] > row_max ? p[j] : row_max;
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < s; ++j) {
      p[j] = std::exp(p[j] - row_max);
      sum += p[j];
    }
    for (int64_t c = 0; c < d; ++c) {
      float acc = 0.0f;
      for (int64_t j = 0; j < s; ++j) acc += to_tf32(p[j] / sum) * to_tf32(vp[base + j * d + c]);
      op[row * d + c] = acc;
    }
  }
  return 0;
}
