// The row layouts of the grid-persistent row pipeline (kernels/cuda/common/row_pipeline.cuh):
// how few, long rows are split into chunks over a grid of resident blocks, chosen on the host
// before a launch. Plain C++ (the device code includes it too) so that CPU unit tests check it
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

/// run_resident's layout for rows x cols elements, at most `max_blocks` resident blocks holding
/// at most `max_chunk` elements each, `step` elements moved per block step (threads x unroll x
/// vector width; a chunk's last partial step costs a round trip like a full one).
/// Cost model: a group passes over a row in ceil(chunk / step) steps plus about one step for
/// the reduction and the exchange (kPassOverheadSteps), and `groups` rows are in flight, so the
/// layout maximizes groups / (steps + kPassOverheadSteps); ties go to more blocks in use, then
/// to fewer chunks. On the H200 at KernelBench 23's 4096 x 393,216 f32 (264 blocks of 512
/// threads, step 8192) it picks 16 chunks of 3 whole steps (3.18 ms) over the 22 chunks of 2.2
/// steps that used every block (3.46 ms); 14, 18, 26, 33 and 44 chunks ran 3.71-5.05 ms
/// (bench/kernels/README.md, sixth session). chunks > max_blocks (the row does not fit) is
/// returned as is: the caller must not run it.
inline Layout choose_resident_layout(int64_t rows, int64_t cols, int64_t max_blocks,
                                     int64_t max_chunk, int vec, int64_t step) {
  constexpr double kPassOverheadSteps = 1.0;
  const int64_t least = (cols + max_chunk - 1) / max_chunk;
  if (least > max_blocks) {
    Layout too_long;
    too_long.chunks = least;
    return too_long;
  }
  step = std::max<int64_t>(step, 1);
  rows = std::max<int64_t>(rows, 1);
  Layout best;
  double best_score = -1.0;
  auto consider = [&](int64_t c) {
    c = std::clamp<int64_t>(c, least, max_blocks);
    const int64_t chunk = ((cols + c - 1) / c + vec - 1) / vec * vec;
    if (chunk > max_chunk) return;
    const int64_t chunks = (cols + chunk - 1) / chunk;  // rounding may leave fewer than c
    const int64_t groups = std::clamp<int64_t>(max_blocks / chunks, 1, rows);
    const double steps = static_cast<double>((chunk + step - 1) / step);
    const double score = static_cast<double>(groups) / (steps + kPassOverheadSteps);
    const bool better =
        score > best_score + 1e-12 ||
        (score > best_score - 1e-12 &&
         (groups * chunks > best.blocks() ||
          (groups * chunks == best.blocks() && chunks < best.chunks)));
    if (better) {
      best_score = score;
      best.groups = groups;
      best.chunks = chunks;
      best.chunk = chunk;
    }
  };
  // For s steps per chunk the fewest chunks give the most groups; the most chunks that keep
  // that many groups use the most blocks. O(max_chunk / step) candidates: this runs per call.
  for (int64_t s = 1; (s - 1) * step < max_chunk; ++s) {
    const int64_t c = (cols + std::min(s * step, max_chunk) - 1) / std::min(s * step, max_chunk);
    consider(c);
    const int64_t groups = std::clamp<int64_t>(max_blocks / std::max(c, least), 1, rows);
    consider(max_blocks / groups);
  }
  consider(least);
  return best;
}

}  // namespace kf::pipeline
