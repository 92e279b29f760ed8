// Reference transposed matrix-vector product (cuda): y[c] = sum_r A[r, c] * x[r].
// The straightforward first kernel: one thread per column, looping over the rows (adjacent
// threads read adjacent columns of a row, so the loads coalesce), fp32 accumulate, 256 threads
// per block. Few columns give few threads: no split of the rows.
// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of the launch.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;

bool is_f32(const DLTensor& t) {
  return t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}

bool is_compact(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expect = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

template <typename T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

__global__ void gemv_t_reference(const float* a, const float* x, float* y, int64_t rows,
                                 int64_t cols) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (col >= cols) return;
  float sum = 0.0f;
  for (int64_t r = 0; r < rows; ++r) sum += a[r * cols + col] * x[r];
  y[col] = sum;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1) return -1;
  const DLTensor& a = args->inputs[0];
  const DLTensor& x = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (a.ndim != 2 || x.ndim != 1 || y.ndim != 1) return -2;
  const int64_t rows = a.shape[0], cols = a.shape[1];
  if (x.shape[0] != rows || y.shape[0] != cols) return -2;
  if (!is_f32(a) || !is_f32(x) || !is_f32(y)) return -3;
  if (!is_compact(a) || !is_compact(x) || !is_compact(y)) return -4;
  if (cols == 0) return 0;

  const int64_t blocks = (cols + kThreads - 1) / kThreads;
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  gemv_t_reference<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      data_of<const float>(a), data_of<const float>(x), data_of<float>(y), rows, cols);
  return static_cast<int>(cudaGetLastError());
}
