// Honest (must pass): O = softmax(Q K^T / sqrt(d)) V in plain fp32, one query row at a time:
// scores, max, exp and sum, then the weighted sum of V rows. Every product and sum is rounded to
// fp32, as the task's fp32 model does, so its error is the model's.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>
#include <vector>

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
      for (int64_t c = 0; c < d; ++c) dot += qp[row * d + c] * kp[base + j * d + c];
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
      for (int64_t j = 0; j < s; ++j) acc += p[j] / sum * vp[base + j * d + c];
      op[row * d + c] = acc;
    }
  }
  return 0;
}
