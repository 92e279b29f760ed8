#include "backends/cuda/cuda_probe.h"

#include <cuda_runtime.h>

namespace kforge::worker::cuda_probe {
namespace {

constexpr int kThreads = 256;
constexpr int kChains = 8;

template <typename T>
__device__ __forceinline__ T fma_of(T a, T b, T c);
template <>
__device__ __forceinline__ float fma_of(float a, float b, float c) {
  return __fmaf_rn(a, b, c);
}
template <>
__device__ __forceinline__ double fma_of(double a, double b, double c) {
  return __fma_rn(a, b, c);
}

/// kChains independent chains x = x * b + c per thread; the result is stored only when it equals
/// an impossible value, which the compiler cannot know, so no FMA is removed.
template <typename T>
__global__ void fma_kernel(int iterations, T b, T c, T* sink) {
  T x[kChains];
  for (int k = 0; k < kChains; ++k) x[k] = static_cast<T>(threadIdx.x + k);
  for (int i = 0; i < iterations; ++i) {
#pragma unroll
    for (int k = 0; k < kChains; ++k) x[k] = fma_of(x[k], b, c);
  }
  T sum = 0;
  for (int k = 0; k < kChains; ++k) sum += x[k];
  if (sum == static_cast<T>(-1.2345)) *sink = sum;
}

template <typename T>
cudaError_t measure(cudaStream_t stream, int sm_count, double* flops_per_s) {
  const int blocks = sm_count * 8;
  T* sink = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaError_t status = cudaMalloc(&sink, sizeof(T));
  if (status == cudaSuccess) status = cudaEventCreate(&start);
  if (status == cudaSuccess) status = cudaEventCreate(&stop);
  // b just below 1 and c small keep x finite and normal however long the chains run.
  const T b = static_cast<T>(0.999999), c = static_cast<T>(1e-3);
  int iterations = 1024;
  double best = 0.0;
  for (int run = 0; status == cudaSuccess && run < 5; ++run) {
    status = cudaEventRecord(start, stream);
    if (status == cudaSuccess) {
      fma_kernel<T><<<blocks, kThreads, 0, stream>>>(iterations, b, c, sink);
      status = cudaGetLastError();
    }
    if (status == cudaSuccess) status = cudaEventRecord(stop, stream);
    if (status == cudaSuccess) status = cudaEventSynchronize(stop);
    float ms = 0.0f;
    if (status == cudaSuccess) status = cudaEventElapsedTime(&ms, start, stop);
    if (status != cudaSuccess) break;
    if (run < 2 && ms < 10.0f) {  // the first runs size the work to about 10 ms
      iterations = static_cast<int>(iterations * (10.0 / (ms > 0.01f ? ms : 0.01f)));
      continue;
    }
    const double flops = 2.0 * kChains * iterations * static_cast<double>(blocks) * kThreads;
    const double rate = flops / (ms * 1e-3);
    if (rate > best) best = rate;  // the best rate of the timed runs
  }
  *flops_per_s = best;
  if (stop) cudaEventDestroy(stop);
  if (start) cudaEventDestroy(start);
  if (sink) cudaFree(sink);
  return status;
}

}  // namespace

int fma_flops_per_s(void* stream, int sm_count, bool f64, double* flops_per_s) {
  *flops_per_s = 0.0;
  const auto s = static_cast<cudaStream_t>(stream);
  return f64 ? measure<double>(s, sm_count, flops_per_s) : measure<float>(s, sm_count, flops_per_s);
}

}  // namespace kforge::worker::cuda_probe
