// TRICK side_stream_waits (must fail: rejected_by_policy, "outside args->stream"). Runs the
// (correct) kernel on a stream of its own, created through a macro that pastes the creation call's
// name (the source never spells it), and waits for that stream before returning. Its outputs are
// complete when kforge_run returns, so the outputs and late-write checks pass; yet the work is
// still outside args->stream: the timing events there enclose nothing and the kernel's time shows
// only on the host clock. Caught by the worker's work audit, which rejects work on any other
// stream whether or not the call waited for it.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

namespace {

constexpr int kRowsPerBlock = 4;  // one warp per row, 4 warps per block

__global__ void softmax_warp_per_row(const float* x, float* y, int64_t rows, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // warp-uniform: the shuffles below see full warps
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float m = -FLT_MAX;
  for (int64_t c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) s += expf(xr[c] - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  for (int64_t c = lane; c < cols; c += 32) yr[c] = expf(xr[c] - m) / s;
}

#define KF_STREAM_CALL(what) cudaStream##what

cudaStream_t g_side = nullptr;

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
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  if (g_side == nullptr) {
    if (cudaError_t e = KF_STREAM_CALL(Create)(&g_side)) return static_cast<int>(e);
  }
  softmax_warp_per_row<<<grid, kRowsPerBlock * 32, 0, g_side>>>(xp, yp, rows, cols);
  if (cudaError_t e = cudaGetLastError()) return static_cast<int>(e);
  return static_cast<int>(cudaStreamSynchronize(g_side));
}
