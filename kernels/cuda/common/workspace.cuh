// Scratch memory a kernel needs for the length of one call (attention's score matrix), from the
// stream-ordered allocator: cudaMallocAsync / cudaFreeAsync on the call's stream.
//
// The device's default memory pool returns freed memory to the OS at the next synchronization
// unless its release threshold says to keep it (CUDA Programming Guide, "Stream Ordered Memory
// Allocator", "Physical Page Caching Behavior"; the threshold defaults to 0). Every call would
// then map its workspace afresh: gigabytes at KernelBench L1/97's shapes. keep_pool_memory()
// raises the threshold once per process, so freed workspaces stay mapped for the next call, as
// PyTorch's caching allocator keeps the intermediates of the eager code it is compared with.
// attention's unfused_wgmma_rs at L1/97's shape on an H100: 19.11 ms a call before, 16.12 after
// (bench/kernels/compute_bound_s20.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kf::workspace {

/// Sets the current device's default pool to keep freed memory (release threshold UINT64_MAX)
/// when the device differs from the last call's (once per process for a worker, which drives one
/// device); returns the cudaError_t of that attempt.
inline cudaError_t keep_pool_memory() {
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) return err;
  static int kept_for = -1;
  static cudaError_t result = cudaSuccess;
  if (kept_for == device) return result;
  cudaMemPool_t pool;
  result = cudaDeviceGetDefaultMemPool(&pool, device);
  if (result == cudaSuccess) {
    uint64_t threshold = UINT64_MAX;
    result = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
  }
  kept_for = device;
  return result;
}

/// cudaMallocAsync of `bytes` on `stream` from the default pool, kept mapped between calls.
inline cudaError_t allocate(void** ptr, size_t bytes, cudaStream_t stream) {
  if (const cudaError_t err = keep_pool_memory(); err != cudaSuccess) return err;
  return cudaMallocAsync(ptr, bytes, stream);
}

}  // namespace kf::workspace
