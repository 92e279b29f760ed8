// Reference of gemm_relu_div (cuda): y[m, n] = relu(sum_k x[m, k] * weight[n, k] + bias[n]) / divisor,
// the twin of reference.cpp. Trusted and plain: one thread per output element, the dot product
// accumulated in KF_ACC (double by default, rounded to float once, so the result is the float64
// answer up to the order of the sum). Built with -DKF_ACC=float it is the task's fp32 model
// ([fp32_model] in task.toml): products and sums rounded to float, k in order.
// Grid: blockDim (32, 8), x over columns, y over rows (grid-stride past 65535 row blocks), so
// KernelBench's 1024 x 8192 output is covered.
// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of the launch.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

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

constexpr int kBlockX = 32, kBlockY = 8;
constexpr int64_t kMaxGridY = 65535;

__global__ void gemm_relu_div(const float* x, const float* w, const float* b, float* y,
                              int64_t m_size, int64_t n_size, int64_t k_size, float divisor) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kBlockX + threadIdx.x;
  if (n >= n_size) return;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * kBlockY + threadIdx.y; m < m_size;
       m += static_cast<int64_t>(gridDim.y) * kBlockY) {
    KF_ACC sum = 0;
    for (int64_t k = 0; k < k_size; ++k) {
      sum += static_cast<KF_ACC>(x[m * k_size + k]) * static_cast<KF_ACC>(w[n * k_size + k]);
    }
    float v = static_cast<float>(sum + static_cast<KF_ACC>(b[n]));
    v = v < 0.0f ? 0.0f : v;  // relu, NaN kept
    y[m * n_size + n] = v / divisor;
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 3 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& b = args->inputs[2];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || w.ndim != 2 || b.ndim != 1 || y.ndim != 2) return -2;
  const int64_t m_size = x.shape[0], k_size = x.shape[1], n_size = w.shape[0];
  if (w.shape[1] != k_size || b.shape[0] != n_size || y.shape[0] != m_size ||
      y.shape[1] != n_size) {
    return -2;
  }
  if (!is_f32(x) || !is_f32(w) || !is_f32(b) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(w) || !is_compact(b) || !is_compact(y)) return -4;
  const float divisor = static_cast<float>(args->scalars[0]);
  if (m_size == 0 || n_size == 0) return 0;

  const int64_t blocks_y = (m_size + kBlockY - 1) / kBlockY;
  const dim3 grid(static_cast<unsigned>((n_size + kBlockX - 1) / kBlockX),
                  static_cast<unsigned>(blocks_y < kMaxGridY ? blocks_y : kMaxGridY));
  gemm_relu_div<<<grid, dim3(kBlockX, kBlockY), 0, static_cast<cudaStream_t>(args->stream)>>>(
      data_of<const float>(x), data_of<const float>(w), data_of<const float>(b),
      data_of<float>(y), m_size, n_size, k_size, divisor);
  return static_cast<int>(cudaGetLastError());
}
