// CHEAT (must fail: wrong_answer). y = alpha * x where each thread handles the element one
// before its index (the layout a halo-shifted stencil would use) and the bounds check tests
// only the upper end: thread 0 writes y[-1], 4 bytes before the start of y, into memory it does
// not own (nothing faults there). Every element of y is right, and nothing here is a call the
// static policy forbids; only the guard band before y shows it.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace {

constexpr int kThreads = 256;

__global__ void scale_shifted(const float* x, float* y, int64_t n, float alpha) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t <= n;
       t += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t i = t - 1;
    if (i < n) y[i] = alpha * x[i];
  }
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
  const unsigned grid =
      static_cast<unsigned>(std::min<int64_t>((n + 1 + kThreads - 1) / kThreads, 4096));
  scale_shifted<<<grid, kThreads, 0, static_cast<cudaStream_t>(args->stream)>>>(xp, yp, n, alpha);
  return static_cast<int>(cudaGetLastError());
}
