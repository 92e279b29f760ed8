// CHEAT (must fail: wrong_answer). y = alpha * x with float4 loads and stores when n % 4 == 0
// and both pointers are 16-byte aligned, and an off-by-one in the vector loop (<= n4): the
// thread that reaches index n4 stores one whole float4 past the end of y, into the allocation's
// slack, where nothing faults. Every element of y is right. Only the timed workload (n = 2^20)
// takes the vector path; the guard band after y catches it there.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace {

constexpr int kThreads = 256;

__global__ void scale4(const float4* x, float4* y, int64_t n4, float alpha) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i <= n4;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const float4 v = x[i];
    y[i] = make_float4(alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w);
  }
}

__global__ void scale1(const float* x, float* y, int64_t n, float alpha) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads)
    y[i] = alpha * x[i];
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 1 || y.ndim != 1 || y.shape[0] != x.shape[0]) return -2;
  const int64_t n = x.shape[0];
  if (n == 0) return 0;
  const float alpha = static_cast<float>(args->scalars[0]);
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);

  const bool vec = n % 4 == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(yp) % 16 == 0;
  const int64_t items = vec ? n / 4 + 1 : n;
  const unsigned grid =
      static_cast<unsigned>(std::min<int64_t>((items + kThreads - 1) / kThreads, 4096));
  if (vec)
    scale4<<<grid, kThreads, 0, stream>>>(reinterpret_cast<const float4*>(xp),
                                          reinterpret_cast<float4*>(yp), n / 4, alpha);
  else
    scale1<<<grid, kThreads, 0, stream>>>(xp, yp, n, alpha);
  return static_cast<int>(cudaGetLastError());
}
