// CHEAT (must fail: wrong_answer). Softmax whose stores are float-quadruples with no tail
// handling: each lane writes 4 consecutive columns, so a row writes round_up(cols, 4) elements.
// One warp walks the rows in order (__syncwarp between them), so a row's extra elements, which
// land in the next row's first columns, are overwritten by that row and every element of y ends
// up right; but the last row writes 1-3 floats past the end of y whenever cols % 4 != 0, into
// the allocation's slack (cudaMalloc rounds sizes up, so nothing faults). It calls nothing the
// static policy forbids; only the guard band after y shows the overrun.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

namespace {

__global__ void softmax_rows_in_order(const float* x, float* y, int64_t rows, int64_t cols) {
  const int lane = threadIdx.x;
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float m = -FLT_MAX;
    for (int64_t c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
    for (int64_t c = lane; c < cols; c += 32) s += expf(xr[c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    for (int64_t c = 4 * lane; c < cols; c += 4 * 32) {
      for (int k = 0; k < 4; ++k) yr[c + k] = expf(xr[c + k] - m) / s;
    }
    __syncwarp();
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (rows == 0 || cols == 0) return 0;
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  softmax_rows_in_order<<<1, 32, 0, static_cast<cudaStream_t>(args->stream)>>>(xp, yp, rows, cols);
  return static_cast<int>(cudaGetLastError());
}
