// TRICK lower_precision (must fail: wrong_answer). A warp-per-row softmax done in bfloat16
// arithmetic: x - m, the exponential (hexp), the running and warp sums, the reciprocal and the
// final product are all bf16 (8-bit mantissa, ~0.4% per rounding), converted to fp32 only on
// the store. Twice the arithmetic throughput on paper and plausible-looking output, but far
// outside an fp32 tolerance: per-element errors of ~1e-2 on short rows, and each lane's bf16
// running sum stalls once it is large. Caught by the element-wise relative tolerance.
#include <kforge/kernel.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kRowsPerBlock = 4;

__global__ void softmax_bf16(const float* x, float* y, int64_t rows, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  __nv_bfloat16 m = __float2bfloat16(-3.0e38f);
  for (int64_t c = lane; c < cols; c += 32) m = __hmax(m, __float2bfloat16(xr[c]));
  for (int o = 16; o > 0; o >>= 1) m = __hmax(m, __shfl_xor_sync(0xffffffffu, m, o));
  __nv_bfloat16 s = __float2bfloat16(0.0f);
  for (int64_t c = lane; c < cols; c += 32) s = __hadd(s, hexp(__hsub(__float2bfloat16(xr[c]), m)));
  for (int o = 16; o > 0; o >>= 1) s = __hadd(s, __shfl_xor_sync(0xffffffffu, s, o));
  const __nv_bfloat16 inv = hrcp(s);
  for (int64_t c = lane; c < cols; c += 32)
    yr[c] = __bfloat162float(__hmul(hexp(__hsub(__float2bfloat16(xr[c]), m)), inv));
}

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
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  softmax_bf16<<<grid, kRowsPerBlock * 32, 0, stream>>>(xp, yp, rows, cols);
  return static_cast<int>(cudaGetLastError());
}
