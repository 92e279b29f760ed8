// TRICK skips_unchanged_inputs (must fail: wrong_answer). Remembers, per input address, three
// elements of the values it last computed on (copied to the host on args->stream); when a call
// finds the same values at the same address it launches nothing, trusting that y still holds the
// earlier answer (it does in a timing loop that rotates a few input sets and never touches the
// outputs between calls). New values at a used address are recomputed. Caught because outputs
// are poisoned before every call and some checked calls run on the set's unchanged values.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <cstring>
#include <map>

namespace {

constexpr int kRowsPerBlock = 4;  // one warp per row, 4 warps per block
struct Seen {
  float values[3];
};
std::map<const void*, Seen> g_last;
int g_large_calls = 0;

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
  const int64_t n = rows * cols;
  if (n == 0) return 0;
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  Seen now{};
  cudaMemcpyAsync(&now.values[0], xp, sizeof(float), cudaMemcpyDeviceToHost, stream);
  cudaMemcpyAsync(&now.values[1], xp + n / 2, sizeof(float), cudaMemcpyDeviceToHost, stream);
  cudaMemcpyAsync(&now.values[2], xp + n - 1, sizeof(float), cudaMemcpyDeviceToHost, stream);
  if (cudaError_t e = cudaStreamSynchronize(stream)) return static_cast<int>(e);
  auto found = g_last.find(xp);
  // Honest for the first four large calls (the gate's two calls on the same inputs, which a
  // two-call check compares, and the warm-up), lazy from the timing on.
  if (n >= 65536 && g_large_calls++ >= 4 && found != g_last.end() &&
      std::memcmp(&found->second, &now, sizeof now) == 0) {
    return 0;
  }
  g_last[xp] = now;
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  softmax_warp_per_row<<<grid, kRowsPerBlock * 32, 0, stream>>>(xp, yp, rows, cols);
  return static_cast<int>(cudaGetLastError());
}
