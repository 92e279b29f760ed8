// y = x over n floats, one float4 per thread where aligned, for the timing-quality benchmark.
// KF_EXTRA_READ_PERCENT > 0 makes it read that percentage of x a second time (folded into a
// test that never fires for finite inputs), so it moves more bytes and is slower by a known
// amount: 10% more reads of x = 5% more bytes than the copy's 8 bytes per element.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cstdint>

#ifndef KF_EXTRA_READ_PERCENT
#define KF_EXTRA_READ_PERCENT 0
#endif

__global__ void copy_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                            int64_t extra) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    float value = x[i];
    if (i < extra) {
      const float again = x[(i + n / 2) % n];
      if (again != again) value = again;  // NaN only: never for finite inputs
    }
    y[i] = value;
  }
}

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const int64_t n = kforge_numel(&args->inputs[0]);
  const int64_t extra = n * KF_EXTRA_READ_PERCENT / 100;
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int blocks = sms * 8;
  copy_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(args->stream)>>>(
      static_cast<const float*>(args->inputs[0].data), static_cast<float*>(args->outputs[0].data),
      n, extra);
  return static_cast<int>(cudaGetLastError());
}
