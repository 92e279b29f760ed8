// TRICK uses_library (must fail: rejected_by_policy). Computes exp(x - m) and 1/sum per row in
// its own kernel, then hands the normalization to cuBLAS (cublasSscal per row, scale read from
// device memory): the search is for hand-written kernels, a library call measures the library,
// and linking arbitrary libraries widens what untrusted code can do. Caught by the static source
// policy (library headers and calls are not allowed) before compiling; built as the corpus
// builds it (no -lcublas) the .so has undefined cublas* symbols and would not even load.
#include <kforge/kernel.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

namespace {

constexpr int kRowsPerBlock = 4;
constexpr int64_t kMaxRows = 1 << 16;
__device__ float g_inverse_sum[kMaxRows];

__global__ void exp_rows(const float* x, float* y, int64_t rows, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float m = -FLT_MAX;
  for (int64_t c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) {
    yr[c] = expf(xr[c] - m);
    s += yr[c];
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) g_inverse_sum[row] = 1.0f / s;
}

cublasHandle_t g_handle = nullptr;

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (rows == 0 || cols == 0) return 0;
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  if (rows > kMaxRows || cols > 0x7fffffff) return -2;
  if (g_handle == nullptr && cublasCreate(&g_handle) != CUBLAS_STATUS_SUCCESS) return -5;
  cublasSetStream(g_handle, stream);
  cublasSetPointerMode(g_handle, CUBLAS_POINTER_MODE_DEVICE);
  float* inverse_sum = nullptr;
  if (cudaError_t e = cudaGetSymbolAddress(reinterpret_cast<void**>(&inverse_sum), g_inverse_sum))
    return static_cast<int>(e);
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  exp_rows<<<grid, kRowsPerBlock * 32, 0, stream>>>(xp, yp, rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    cublasSscal(g_handle, static_cast<int>(cols), inverse_sum + r, yp + r * cols, 1);
  return static_cast<int>(cudaGetLastError());
}
