// Reference of attention (cuda): o[b, i, :] = sum_j p[b, i, j] v[b, j, :] with
// p[b, i, :] = softmax_j(q[b, i, :] . k[b, j, :] / sqrt(d)), the twin of reference.cpp.
// Trusted and plain: three kernels over a [b, s, s] workspace of KF_ACC (double by default, so
// the result is the float64 answer up to the order of the sums, rounded once at the store):
//   scores   one thread per (row, key): the dot product times 1/sqrt(d);
//   softmax  one thread per row, in place: max, exp(score - max), sum, divide;
//   output   one thread per (row, column): sum_j p[row, j] v[j, column].
// Built with -DKF_ACC=float it is the task's fp32 model ([fp32_model] in task.toml).
// Grids: blockDim (32, 8), x over keys or columns, y over the b * s rows (grid-stride past 65535
// row blocks). The workspace, b*s*s*sizeof(KF_ACC) bytes (2 GiB at KernelBench's
// b = 1024, s = 512), comes from cudaMallocAsync on the task's stream.
// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of the allocation or a launch.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#ifndef KF_ACC
#define KF_ACC double
#endif

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

bool same_shape(const DLTensor& a, const DLTensor& b) {
  return a.shape[0] == b.shape[0] && a.shape[1] == b.shape[1] && a.shape[2] == b.shape[2];
}

constexpr int kBlockX = 32, kBlockY = 8;
constexpr int64_t kMaxGridY = 65535;

// p[row, j] = scale * q[row, :] . k[batch * s + j, :], rows = b * s, batch = row / s.
__global__ void scores(const float* q, const float* k, KF_ACC* p, int64_t rows, int64_t s,
                       int64_t d, KF_ACC scale) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kBlockX + threadIdx.x;
  if (j >= s) return;
  for (int64_t row = static_cast<int64_t>(blockIdx.y) * kBlockY + threadIdx.y; row < rows;
       row += static_cast<int64_t>(gridDim.y) * kBlockY) {
    const float* key = k + (row / s * s + j) * d;
    KF_ACC dot = 0;
    for (int64_t c = 0; c < d; ++c) {
      dot += static_cast<KF_ACC>(q[row * d + c]) * static_cast<KF_ACC>(key[c]);
    }
    p[row * s + j] = dot * scale;
  }
}

// Each row of p [rows, s] replaced by its softmax.
__global__ void softmax_rows(KF_ACC* p, int64_t rows, int64_t s) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  KF_ACC* pr = p + row * s;
  KF_ACC row_max = -INFINITY;
  for (int64_t j = 0; j < s; ++j) row_max = pr[j] > row_max ? pr[j] : row_max;
  KF_ACC sum = 0;
  for (int64_t j = 0; j < s; ++j) {
    pr[j] = exp(pr[j] - row_max);
    sum += pr[j];
  }
  for (int64_t j = 0; j < s; ++j) pr[j] = pr[j] / sum;
}

// o[row, c] = sum_j p[row, j] v[batch * s + j, c].
__global__ void weighted_sum(const KF_ACC* p, const float* v, float* o, int64_t rows, int64_t s,
                             int64_t d) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kBlockX + threadIdx.x;
  if (c >= d) return;
  for (int64_t row = static_cast<int64_t>(blockIdx.y) * kBlockY + threadIdx.y; row < rows;
       row += static_cast<int64_t>(gridDim.y) * kBlockY) {
    const float* vb = v + row / s * s * d;
    KF_ACC sum = 0;
    for (int64_t j = 0; j < s; ++j) {
      sum += p[row * s + j] * static_cast<KF_ACC>(vb[j * d + c]);
    }
    o[row * d + c] = static_cast<float>(sum);
  }
}

dim3 grid_over(int64_t columns, int64_t rows) {
  const int64_t blocks_y = (rows + kBlockY - 1) / kBlockY;
  return dim3(static_cast<unsigned>((columns + kBlockX - 1) / kBlockX),
              static_cast<unsigned>(blocks_y < kMaxGridY ? blocks_y : kMaxGridY));
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 3 || args->num_outputs != 1 || args->num_scalars != 0) return -1;
  const DLTensor& q = args->inputs[0];
  const DLTensor& k = args->inputs[1];
  const DLTensor& v = args->inputs[2];
  const DLTensor& o = args->outputs[0];
  if (q.ndim != 3 || k.ndim != 3 || v.ndim != 3 || o.ndim != 3) return -2;
  if (!same_shape(q, k) || !same_shape(q, v) || !same_shape(q, o)) return -2;
  if (!is_f32(q) || !is_f32(k) || !is_f32(v) || !is_f32(o)) return -3;
  if (!is_compact(q) || !is_compact(k) || !is_compact(v) || !is_compact(o)) return -4;
  const int64_t s = q.shape[1], d = q.shape[2], rows = q.shape[0] * s;
  if (rows == 0 || d == 0) return 0;
  const KF_ACC scale = KF_ACC(1) / sqrt(static_cast<KF_ACC>(d));
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);

  void* workspace = nullptr;
  cudaError_t err = cudaMallocAsync(&workspace, sizeof(KF_ACC) * rows * s, stream);
  if (err != cudaSuccess) return static_cast<int>(err);
  KF_ACC* p = static_cast<KF_ACC*>(workspace);
  scores<<<grid_over(s, rows), dim3(kBlockX, kBlockY), 0, stream>>>(
      data_of<const float>(q), data_of<const float>(k), p, rows, s, d, scale);
  softmax_rows<<<static_cast<unsigned>((rows + 255) / 256), 256, 0, stream>>>(p, rows, s);
  weighted_sum<<<grid_over(d, rows), dim3(kBlockX, kBlockY), 0, stream>>>(
      p, data_of<const float>(v), data_of<float>(o), rows, s, d);
  err = cudaGetLastError();
  const cudaError_t freed = cudaFreeAsync(workspace, stream);
  return static_cast<int>(err != cudaSuccess ? err : freed);
}
