// TRICK caches_by_pointer (must fail: wrong_answer). Memoizes on (x pointer, rows, cols): the
// first call for a key computes a correct softmax and copies it into a static device-side cache
// slot; every later call with the same key replays the slot with one device-to-device copy,
// without reading x. A timing loop on the same buffers sees a copy-speed "kernel", and a check
// done once passes. Caught because the evaluator re-checks with different input values at the
// same address and shape (and checks outputs after timed calls). Uses no allocation API: the
// cache is a __device__ array.
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

constexpr int kSlots = 8;
constexpr int64_t kSlotFloats = int64_t{1} << 20;  // 4 MiB per slot: the timed 512 x 1024 fits
__device__ float g_cache[kSlots][kSlotFloats];

struct Slot {
  const void* x = nullptr;
  int64_t rows = 0, cols = 0;
};
Slot g_slots[kSlots];
int g_next_slot = 0;

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
  const size_t bytes = static_cast<size_t>(rows * cols) * sizeof(float);
  float* cache = nullptr;
  if (cudaError_t e = cudaGetSymbolAddress(reinterpret_cast<void**>(&cache), g_cache))
    return static_cast<int>(e);
  for (int i = 0; i < kSlots; ++i) {
    const Slot& slot = g_slots[i];
    if (slot.x == xp && slot.rows == rows && slot.cols == cols)  // hit: replay, never read x
      return static_cast<int>(
          cudaMemcpyAsync(yp, cache + i * kSlotFloats, bytes, cudaMemcpyDeviceToDevice, stream));
  }
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  softmax_warp_per_row<<<grid, kRowsPerBlock * 32, 0, stream>>>(xp, yp, rows, cols);
  if (rows * cols <= kSlotFloats) {
    const int i = g_next_slot++ % kSlots;
    g_slots[i] = Slot{xp, rows, cols};
    cudaMemcpyAsync(cache + i * kSlotFloats, yp, bytes, cudaMemcpyDeviceToDevice, stream);
  }
  return static_cast<int>(cudaGetLastError());
}
