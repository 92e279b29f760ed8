// CHEAT (must be rejected: wrong_answer by the fp32 precision rule). O = softmax(Q K^T / sqrt(d)) V
// with Q, K, the weights P and V rounded to TF32 (cvt.rna.tf32.f32, 10 mantissa bits) before the
// fp32 FMAs: the arithmetic plain TF32 tensor cores do for S = Q K^T and O = P V. Each product
// errs by ~2^-11 relative, ~100x an fp32 computation's error, yet within KernelBench's 1e-2
// tolerance. kforge must reject it through the task's precision = "fp32", not the tolerance.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace {

constexpr int kThreads = 128;

__device__ __forceinline__ float tf32(float v) {
  uint32_t out;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(out) : "f"(v));
  return __uint_as_float(out);
}

__global__ void attend_rows(const float* q, const float* k, const float* v, float* o, int64_t s,
                            int64_t d, float scale) {
  extern __shared__ float p[];  // [s] scores, then weights; p[s] holds the row's sum
  const int64_t row = blockIdx.x;
  const int64_t base = row / s * s * d;
  for (int64_t j = threadIdx.x; j < s; j += kThreads) {
    float dot = 0.0f;
    for (int64_t c = 0; c < d; ++c) dot = fmaf(tf32(q[row * d + c]), tf32(k[base + j * d + c]), dot);
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
    for (int64_t j = 0; j < s; ++j) acc = fmaf(tf32(p[j] / p[s]), tf32(v[base + j * d + c]), acc);
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
