// What the kernel probes in bench/kernels share (host code, nvcc): a fatal check of CUDA calls
// and the median of event-timed calls. Each call is bracketed by events and synchronized, so a
// probe's number is one call's device time plus its launch, as a user's single call sees it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace probe {

/// Exits with status 2 naming `probe` and `what` when err is not cudaSuccess.
inline void check(cudaError_t err, const char* probe, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", probe, what, cudaGetErrorString(err));
    std::exit(2);
  }
}

/// Times `calls` calls of call() (returning a cudaError_t, or an int that is 0 on success) after
/// `warmup` untimed ones; returns the sorted times in ms. Exits on a failed call.
template <typename Call>
std::vector<float> time_calls(const char* probe, int warmup, int calls, Call call) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), probe, "event");
  check(cudaEventCreate(&stop), probe, "event");
  std::vector<float> ms;
  for (int it = 0; it < warmup + calls; ++it) {
    check(cudaEventRecord(start), probe, "record");
    if (const auto rc = call(); rc != 0) {
      std::fprintf(stderr, "%s: the call returned %d\n", probe, static_cast<int>(rc));
      std::exit(1);
    }
    check(cudaEventRecord(stop), probe, "record");
    check(cudaEventSynchronize(stop), probe, "sync");
    float t = 0.0f;
    check(cudaEventElapsedTime(&t, start, stop), probe, "elapsed");
    if (it >= warmup) ms.push_back(t);
  }
  check(cudaEventDestroy(start), probe, "event");
  check(cudaEventDestroy(stop), probe, "event");
  std::sort(ms.begin(), ms.end());
  return ms;
}

}  // namespace probe
