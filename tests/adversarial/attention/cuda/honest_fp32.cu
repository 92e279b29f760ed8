// Honest (must pass): O = softmax(Q K^T / sqrt(d)) V in plain fp32, one block per query row: the
// row's scores into shared memory, max and sum by thread 0, then each thread a strided share of
// the output columns. Every product and sum is rounded to fp32, as the task's fp32 model does.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace {

constexpr int kThreads = 128;

__global__ void attend_rows(const float* q, const float* k, const float* v, float* o, int64_t s,
                            int64_t d, float scale) {
  extern __shared__ float p[];  // [s] scores, then weights; p[s] holds the row's sum
  const int64_t row = blockIdx.x;
  const int64_t base = row / s * s * d;
  for (int64_t j = threadIdx.x; j < s; j += kThreads) {
    float dot = 0.0f;
    for (int64_t c = 0; c < d; ++c) dot = fmaf(q[row * d + c], k[base + j * d + c], dot);
    p[j] = dot * scale;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float row_max = -INFINITY;
    for (int64_t j = 0; j < s; ++j) row_max = fmaxf(row_max, p[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j < s; ++j) {
      p[j] = expf(p[j] - row_max);
      sum += p[j];
    }
    p[s] = sum;
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < d; c += kThreads) {
    float acc = 0.0f;
    for (int64_t j = 0; j < s; ++j) acc = fmaf(p[j] / p[s], v[base + j * d + c], acc);
    o[row * d + c] = acc;
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 3 || args->num_outputs != 1) return -1;
  const DLTensor& q = args->inputs[0];
  const int64_t b_size = q.shape[0], s = q.shape[1], d = q.shape[2];
  const size_t smem = sizeof(float) * (s + 1);
  if (smem > 48 * 1024) return -5;  // rows longer than the corpus needs
  attend_rows<<<static_cast<unsigned>(b_size * s), kThreads, smem,
                static_cast<cudaStream_t>(args->stream)>>>(
      static_cast<const float*>(q.data), static_cast<const float*>(args->inputs[1].data),
      static_cast<const float*>(args->inputs[2].data), static_cast<float*>(args->outputs[0].data),
      s, d, 1.0f / std::sqrt(static_cast<float>(d)));
  return static_cast<int>(cudaGetLastError());
}
