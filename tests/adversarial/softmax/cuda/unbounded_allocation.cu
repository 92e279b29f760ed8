// TRICK unbounded_allocation (must fail: runtime_error). Grabs device memory in 1 GiB
// cudaMalloc chunks, never freeing, until cudaMalloc fails (all of the GPU's memory is then held
// by the worker), and returns that failure (cudaErrorMemoryAllocation = 2) as its exit code.
// The failure is reported, not a crash; the evaluator must then retire the worker (its device
// memory is leaked) so later candidates are not starved.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cstddef>

namespace {

constexpr size_t kChunkBytes = size_t{1} << 30;

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  (void)args;
  for (;;) {
    void* chunk = nullptr;
    if (cudaError_t e = cudaMalloc(&chunk, kChunkBytes)) return static_cast<int>(e);
  }
}
