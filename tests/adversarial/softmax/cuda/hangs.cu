// TRICK hangs (must fail: timeout). The kernel spins forever on a volatile device flag that
// nothing ever sets. kforge_run itself returns at once (the launch is asynchronous); the hang
// shows at the caller's synchronize. The evaluator must bound the wait and kill the worker (a
// spinning kernel cannot be cancelled from the host; only destroying the context or the process
// frees the GPU).
#include <kforge/kernel.h>

#include <cuda_runtime.h>

namespace {

__device__ int g_release = 0;

__global__ void spin() {
  while (*static_cast<volatile int*>(&g_release) == 0) {
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  spin<<<1, 32, 0, static_cast<cudaStream_t>(args->stream)>>>();
  return static_cast<int>(cudaGetLastError());
}
