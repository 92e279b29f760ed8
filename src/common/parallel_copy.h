// A memcpy spread over threads, for the gigabyte copies between pinned staging buffers and
// tensor files or host tensors.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "common/cpus.h"

namespace kforge {

/// memcpy of `bytes` bytes, split from 8 MiB on over up to 8 threads, at most usable_cpus()
/// (page faults on a fresh file mapping are the cost, and they run in parallel).
inline void parallel_copy(std::byte* dst, const std::byte* src, int64_t bytes) {
  constexpr int64_t kParallelFrom = int64_t{8} << 20;
  const int threads = bytes < kParallelFrom
                          ? 1
                          : std::min(8, usable_cpus());
  if (threads == 1) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return;
  }
  std::vector<std::thread> pool;
  const int64_t slice = (bytes + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const int64_t begin = t * slice, end = std::min(bytes, begin + slice);
    if (begin >= end) break;
    pool.emplace_back([=] { std::memcpy(dst + begin, src + begin, static_cast<size_t>(end - begin)); });
  }
  for (std::thread& thread : pool) thread.join();
}

}  // namespace kforge
