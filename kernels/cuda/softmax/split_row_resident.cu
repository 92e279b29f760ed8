// Softmax over the last dimension, each row split across the blocks of a persistent grid:
//   y[r, c] = exp(x[r, c] - m) / sum_c exp(x[r, c] - m),  m = max_c x[r, :].
// For few, very long rows (KernelBench's 4096 x 393,216). The kernel and its pipeline live in
// kernels/cuda/common/softmax_rows/split_row.cuh and kernels/cuda/common/row_pipeline.cuh
// (shared with log_softmax): every block is resident (cooperative launch), keeps its chunk of
// a row in shared memory with an online (max, sum), publishes that to a global slot, and
// combines the group's partials and writes its chunk from shared memory (or, for a row too long
// for the grid's shared memory, re-read from L2). DRAM traffic: x once, y once.
// Vector accesses when cols % VEC == 0 and both pointers are VEC-element aligned; otherwise the
// scalar instantiation runs.
#include <cuda/common/softmax_rows/split_row.cuh>

// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 a dtype other than the compiled
// element type (x and y alike), -4 non-compact strides, otherwise a cudaError_t (a failed
// cooperative launch included). The checks and the vector dispatch: split_row::run.
KFORGE_API int kforge_run(const kforge_args* args) {
  return kf::softmax_rows::split_row::run<kf::SoftmaxOutput>(args);
}
