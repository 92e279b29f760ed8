// Log-softmax over the last dimension, each row split across the blocks of a persistent grid:
//   y[r, c] = (x[r, c] - m) - log(sum_c exp(x[r, c] - m)),  m = max_c x[r, :].
// For few, very long rows (KernelBench's 4096 x 393,216). The kernel and its pipeline live in
// include/kforge/softmax_split_row.cuh and include/kforge/row_pipeline.cuh (shared with the
// other family of the pair): every block is resident (cooperative launch), keeps its chunk of a
// row in shared memory with an online (max, sum), publishes that to a global slot, and combines the
// group's partials and writes its chunk from shared memory (or, for a row too long for the grid's
// shared memory, re-read from L2). DRAM traffic: x once, y once.
// Vector accesses when cols % VEC == 0 and both pointers are VEC-element aligned; otherwise the
// scalar instantiation runs.
#include <kforge/softmax_split_row.cuh>

// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 a dtype other than the compiled
// element type (x and y alike), -4 non-compact strides, otherwise a cudaError_t (a failed
// cooperative launch included).
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (!kf::is_elem(x) || !kf::is_elem(y)) return -3;
  if (!kf::is_compact(x) || !kf::is_compact(y)) return -4;
  if (rows == 0 || cols == 0) return 0;

  const kf_elem* xp = kf::data_of<const kf_elem>(x);
  kf_elem* yp = kf::data_of<kf_elem>(y);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  constexpr int bytes = KF_VEC * kf::kElemBytes;
  const bool vec =
      KF_VEC > 1 && cols % KF_VEC == 0 && kf::aligned(xp, bytes) && kf::aligned(yp, bytes);
  if (vec) return static_cast<int>(kf::softmax_rows::launch<KF_VEC, true>(xp, yp, rows, cols, stream));
  return static_cast<int>(kf::softmax_rows::launch<1, true>(xp, yp, rows, cols, stream));
}
