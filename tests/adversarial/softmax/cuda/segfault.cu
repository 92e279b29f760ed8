// TRICK segfault (must fail: runtime_error). The kernel stores through a null "scratch" pointer
// (passed as an argument, so the compiler cannot see it): an illegal-address fault
// (cudaErrorIllegalAddress), reported asynchronously at the next synchronize. It is a device
// error the worker can observe and report, not a crash of the worker process; the CUDA context
// is unusable afterwards, so the worker must be replaced before the next candidate.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cstdint>

namespace {

__global__ void scribble(float* scratch, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    scratch[i] = 0.0f;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (rows == 0 || cols == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  float* scratch = nullptr;  // "allocated later"
  scribble<<<64, 256, 0, stream>>>(scratch, rows * cols);
  return static_cast<int>(cudaGetLastError());
}
