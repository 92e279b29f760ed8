// Reference transposed matrix-vector product (cpu): y[c] = sum_r A[r, c] * x[r].
// Trusted and plain: single-threaded, rows walked in memory order (row r adds A[r, :] * x[r]
// into one accumulator per column), each accumulator a double.
// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
#include <kforge/kernel.h>

#include <cstdint>
#include <vector>

namespace {

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

  const float* ap = data_of<const float>(a);
  const float* xp = data_of<const float>(x);
  float* yp = data_of<float>(y);
  std::vector<double> sum(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* ar = ap + r * cols;
    const double xr = xp[r];
    for (int64_t c = 0; c < cols; ++c) sum[c] += static_cast<double>(ar[c]) * xr;
  }
  for (int64_t c = 0; c < cols; ++c) yp[c] = static_cast<float>(sum[c]);
  return 0;
}
