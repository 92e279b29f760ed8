// TRICK computes_known_inputs (must fail: wrong_answer). Fingerprints its input from three
// elements copied to the host (on args->stream). At large shapes it launches the kernel only
// for inputs it saw in its first two calls (the gate's check of the timed workload, whose inputs
// a harness then reuses for its timing re-check) and launches nothing for any other input.
// Caught because some checked calls run on the rotated sets' own values, which this kernel never
// saw before the timing, and outputs are poisoned before every call.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <cstring>
#include <set>
#include <tuple>

namespace {

constexpr int kRowsPerBlock = 4;  // one warp per row, 4 warps per block
using Fingerprint = std::tuple<float, float, float>;
std::set<Fingerprint> g_known;
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
  if (n >= 65536) {
    float sample[3];
    cudaMemcpyAsync(&sample[0], xp, sizeof(float), cudaMemcpyDeviceToHost, stream);
    cudaMemcpyAsync(&sample[1], xp + n / 2, sizeof(float), cudaMemcpyDeviceToHost, stream);
    cudaMemcpyAsync(&sample[2], xp + n - 1, sizeof(float), cudaMemcpyDeviceToHost, stream);
    if (cudaError_t e = cudaStreamSynchronize(stream)) return static_cast<int>(e);
    const Fingerprint print{sample[0], sample[1], sample[2]};
    if (g_large_calls++ < 2) {
      g_known.insert(print);
    } else if (g_known.count(print) == 0) {
      return 0;  // an input no check has used before: skip the work
    }
  }
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  softmax_warp_per_row<<<grid, kRowsPerBlock * 32, 0, stream>>>(xp, yp, rows, cols);
  return static_cast<int>(cudaGetLastError());
}
