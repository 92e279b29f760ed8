// The host-side layout choice of the grid-persistent row pipeline
// (kernels/cuda/common/row_layout.h): every element of a row is owned by exactly one chunk, the
// chunks fit the shared memory they are given, the grid is not over-subscribed, and the shapes
// the H200 runs get the layouts measured in bench/kernels/README.md. The kernels themselves are checked on a GPU (kernel_families_test).
#include <cuda/common/row_layout.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

namespace kf::pipeline {
namespace {

// Properties every layout must have for the kernel's Work to cover the row once.
void expect_covers(const Layout& layout, int64_t rows, int64_t cols, int64_t max_blocks, int vec) {
  EXPECT_GE(layout.chunks, 1);
  EXPECT_GE(layout.groups, 1);
  EXPECT_LE(layout.groups, std::max<int64_t>(rows, 1));
  EXPECT_LE(layout.blocks(), max_blocks);
  EXPECT_EQ(layout.chunk % vec, 0);
  // Chunk c covers [min(cols, c * chunk), min(cols, (c + 1) * chunk)): together all of the row.
  // (A trailing chunk may be empty, e.g. 8 columns in 2 chunks of 8: its block idles.)
  EXPECT_GE(layout.chunk * layout.chunks, cols);
}

TEST(RowLayout, ResidentChunksFitTheirSharedMemoryAndCoverTheRow) {
  // (rows, cols, resident blocks, max chunk elements): KernelBench 23's shape at 2 blocks per
  // SM of an H200, a vocabulary, an odd row, rows much shorter than the grid, one row.
  const std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> cases = {
      {4096, 393216, 264, 28152}, {1024, 32000, 528, 14072}, {7, 1000003, 132, 56824},
      {100000, 40, 264, 28152},   {1, 393216, 264, 28152},  {3, 8, 4096, 16}};
  for (const auto& [rows, cols, blocks, max_chunk] : cases) {
    SCOPED_TRACE(testing::Message() << rows << " x " << cols << ", " << blocks << " blocks");
    for (const int64_t step : {int64_t{1}, int64_t{8192}, int64_t{512 * 4 * 8}, max_chunk * 3}) {
      SCOPED_TRACE(testing::Message() << "step " << step);
      const Layout layout = choose_resident_layout(rows, cols, blocks, max_chunk, 8, step);
      ASSERT_LE(layout.chunks, blocks);
      expect_covers(layout, rows, cols, blocks, 8);
      EXPECT_LE(layout.chunk, max_chunk);
      // No chunk is empty: every block of a group has elements.
      EXPECT_LT((layout.chunks - 1) * layout.chunk, cols);
    }
  }
}

TEST(RowLayout, ResidentLayoutOfKernelBench23TakesWholeSteps) {
  // 393,216 floats over 264 blocks of at most 28,152, 512 threads x UNROLL 4 x VEC 4 = 8192 per
  // step: 16 chunks of exactly 3 steps (16 groups, 8 blocks idle), not the 22 chunks of 2.2 steps
  // that used all 264 (3.18 against 3.46 ms on the H200).
  const Layout layout = choose_resident_layout(4096, 393216, 264, 28152, 8, 8192);
  EXPECT_EQ(layout.chunks, 16);
  EXPECT_EQ(layout.groups, 16);
  EXPECT_EQ(layout.chunk, 24576);
}

TEST(RowLayout, ResidentLayoutOfAVocabularyKeepsTwoChunksPerRow) {
  // 1024 x 32000: two chunks of 16,000 (2 steps each) and 132 groups beat four of 8000 (1 step,
  // 66 groups) and one row per block, which does not fit.
  const Layout layout = choose_resident_layout(1024, 32000, 264, 28152, 8, 8192);
  EXPECT_EQ(layout.chunks, 2);
  EXPECT_EQ(layout.groups, 132);
  EXPECT_EQ(layout.chunk, 16000);
}

TEST(RowLayout, ResidentLayoutSpreadsASingleRowOverTheGrid) {
  // One row: every extra chunk shortens the pass, so the 264 blocks share it (263 chunks of
  // 1496: chunks are whole vectors of 8).
  const Layout layout = choose_resident_layout(1, 393216, 264, 28152, 8, 8192);
  EXPECT_EQ(layout.groups, 1);
  EXPECT_EQ(layout.chunks, 263);
  EXPECT_EQ(layout.chunk, 1496);
}

TEST(RowLayout, ResidentLayoutReportsARowTooLongForTheGrid) {
  // 16 rows of 4M floats cannot live in 132 blocks of 28K: the caller must fall back.
  const Layout layout = choose_resident_layout(16, 4194304, 132, 28152, 8, 8192);
  EXPECT_GT(layout.chunks, 132);
}

TEST(RowLayout, L2LayoutKeepsTheRowsInFlightWithinTheBudget) {
  // (rows, cols, elem bytes, blocks, threads, vec, lag, budget)
  struct Case {
    int64_t rows, cols;
    int elem_bytes;
    int64_t blocks;
    int threads, vec, lag;
    int64_t budget;
  };
  const std::vector<Case> cases = {{16, 4194304, 4, 264, 512, 4, 0, 25 << 20},
                                   {16, 4194304, 4, 264, 512, 4, 1, 25 << 20},
                                   {4096, 393216, 2, 264, 256, 8, 0, 25 << 20},
                                   {5, 1000003, 4, 132, 256, 1, 0, 25 << 20},
                                   {4096, 64, 4, 264, 512, 4, 0, 25 << 20}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.rows << " x " << c.cols << " lag " << c.lag);
    const Layout layout = choose_l2_layout(c.rows, c.cols, c.elem_bytes, c.blocks, c.threads,
                                           c.vec, c.lag, c.budget);
    expect_covers(layout, c.rows, c.cols, c.blocks, c.vec);
    // At least one vector per thread in each chunk unless the row itself is shorter.
    if (c.cols >= int64_t{c.threads} * c.vec) EXPECT_GE(layout.chunk, int64_t{c.threads} * c.vec);
    // The rows in flight (one per group, LAG + 1 deep) fit the budget whenever one row does
    // and the row can be split into enough chunks of at least one vector per thread.
    const int64_t row_bytes = c.cols * c.elem_bytes;
    const int64_t fitting = c.budget / (row_bytes * (c.lag + 1));
    const int64_t needed = fitting > 0 ? (c.blocks + fitting - 1) / fitting : 0;
    if (fitting > 0 && needed <= std::max<int64_t>(1, c.cols / (int64_t{c.threads} * c.vec))) {
      EXPECT_LE(layout.groups * (c.lag + 1) * row_bytes, c.budget);
    }
  }
}

}  // namespace
}  // namespace kf::pipeline
