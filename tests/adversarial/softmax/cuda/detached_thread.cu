// TRICK detached_thread (must fail: rejected_by_policy; dynamically: wrong_answer). Returns at
// once and lets a detached host std::thread launch the (correct) kernel a couple of
// milliseconds later. The timed call then measures only the thread spawn (events recorded on the
// stream around the call enclose no work: a huge fake speedup), and the kernel lands after the
// caller has synchronized and read y, or while it reuses or frees the buffers. Caught
// statically (the source policy forbids creating threads); if that were disabled, by checking
// outputs right after the call and a stream synchronize (still NaN), and by the host wall-clock
// cross-check of the timings.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cfloat>
#include <chrono>
#include <cstdint>
#include <thread>

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
  std::thread([=] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    softmax_warp_per_row<<<grid, kRowsPerBlock * 32, 0, stream>>>(xp, yp, rows, cols);
  }).detach();
  return 0;
}
