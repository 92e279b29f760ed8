// The row layouts of the grid-persistent row pipeline (include/kforge/row_pipeline.cuh): how few,
// long rows are split into chunks over a grid of resident blocks, chosen on the host before a
// launch. Plain C++ (the device code includes it too) so that CPU unit tests check it
// (tests/row_layout_test.cpp).
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__CUDACC__)
#define KF_HOST_DEVICE __host__ __device__
#else
#define KF_HOST_DEVICE
#endif

namespace kf::pipeline {

/// How the rows are split: `groups` groups of `chunks` blocks; block b works on the rows
/// r = b / chunks + k * groups (k = 0, 1, ...) and on elements [c * chunk, (c + 1) * chunk) of
/// each (c = b % chunks; `chunk` a multiple of the vector width).
struct Layout {
  int64_t groups = 1;
  int64_t chunks = 1;
  int64_t chunk = 0;

  KF_HOST_DEVICE int64_t blocks() const { return groups * chunks; }
};

/// The layout given a number of chunks per row; groups take the blocks left (at most `rows`).
inline Layout layout_with(int64_t rows, int64_t cols, int64_t chunks, int64_t max_blocks,
                          int vec) {
  Layout layout;
  layout.chunks = std::clamp<int64_t>(chunks, 1, max_blocks);
  layout.groups = std::clamp<int64_t>(max_blocks / layout.chunks, 1, rows);
  const int64_t per_chunk = (cols + layout.chunks - 1) / layout.chunks;
  layout.chunk = (per_chunk + vec - 1) / vec * vec;
  return layout;
}

/// run_l2's layout for rows x cols elements of `elem_bytes` bytes, at most `max_blocks` resident
/// blocks of `threads` threads loading `vec` elements at a time: enough chunks per row that
/// groups * (lag + 1) rows fit `l2_budget` bytes, but at least one vector per thread.
inline Layout choose_l2_layout(int64_t rows, int64_t cols, int elem_bytes, int64_t max_blocks,
                               int threads, int vec, int lag, int64_t l2_budget) {
  const int64_t row_bytes = cols * elem_bytes;
  const int64_t groups_fitting = std::max<int64_t>(1, l2_budget / (row_bytes * (lag + 1)));
  const int64_t chunks_for_l2 = (max_blocks + groups_fitting - 1) / groups_fitting;
  const int64_t chunks_for_loads = std::max<int64_t>(1, cols / (int64_t{threads} * vec));
  return layout_with(rows, cols, std::min(chunks_for_l2, chunks_for_loads), max_blocks, vec);
}

/// run_resident's layout: the fewest chunks of at most `max_chunk` elements, then up to twice
/// that many if it leaves fewer of the `max_blocks` idle (groups * chunks closer to max_blocks).
/// chunks > max_blocks (the row does not fit) is returned as is: the caller must not run it.
inline Layout choose_resident_layout(int64_t rows, int64_t cols, int64_t max_blocks,
                                     int64_t max_chunk, int vec) {
  const int64_t least = (cols + max_chunk - 1) / max_chunk;
  if (least > max_blocks) {
    Layout too_long;
    too_long.chunks = least;
    return too_long;
  }
  int64_t best = least;
  for (int64_t c = least; c <= std::min(2 * least, max_blocks); ++c) {
    const int64_t used = std::min(max_blocks / c, rows) * c;
    const int64_t best_used = std::min(max_blocks / best, rows) * best;
    if (used > best_used) best = c;
  }
  return layout_with(rows, cols, best, max_blocks, vec);
}

}  // namespace kf::pipeline
