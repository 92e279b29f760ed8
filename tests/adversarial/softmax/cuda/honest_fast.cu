// HONEST (must pass: ok). A fast softmax: one block of 256 threads per row, three passes over
// the row (max, sum of exponentials, write) with warp-shuffle reductions combined through shared
// memory, float4 loads and stores when every row start is 16-byte aligned (cols % 4 == 0 and
// aligned base pointers) and a scalar path otherwise (tails and odd sizes), __expf (a few ulp on
// the arguments here, which are <= 0), on args->stream. At 512 x 1024 it fills the GPU with 512
// blocks of coalesced loads, where the reference runs 512 threads with uncoalesced loads and
// double exponentials: expected well over 5x faster.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <type_traits>

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// Reduces v over the block with op (max or sum); every thread gets the result.
template <typename Op>
__device__ float block_reduce(float v, Op op) {
  __shared__ float warp_partial[kWarps];
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) warp_partial[threadIdx.x / 32] = v;
  __syncthreads();
  v = warp_partial[0];
  for (int w = 1; w < kWarps; ++w) v = op(v, warp_partial[w]);
  __syncthreads();  // everyone has read warp_partial before the next call overwrites it
  return v;
}

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// V = 4: float4 path (cols % 4 == 0, aligned); V = 1: scalar path.
template <int V>
__global__ void __launch_bounds__(kThreads) softmax_block_per_row(const float* __restrict__ x,
                                                                  float* __restrict__ y,
                                                                  int64_t cols) {
  using Vec = typename std::conditional<V == 4, float4, float>::type;
  const int64_t n = cols / V;
  const Vec* xr = reinterpret_cast<const Vec*>(x + static_cast<int64_t>(blockIdx.x) * cols);
  Vec* yr = reinterpret_cast<Vec*>(y + static_cast<int64_t>(blockIdx.x) * cols);
  auto lanes = [](const Vec& v, auto f) {
    if constexpr (V == 4) {
      f(v.x); f(v.y); f(v.z); f(v.w);
    } else {
      f(v);
    }
  };

  float m = -FLT_MAX;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) lanes(xr[i], [&](float e) { m = fmaxf(m, e); });
  m = block_reduce(m, Max{});
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) lanes(xr[i], [&](float e) { s += __expf(e - m); });
  const float inv = 1.0f / block_reduce(s, Sum{});
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    Vec v = xr[i];
    if constexpr (V == 4) {
      v.x = __expf(v.x - m) * inv; v.y = __expf(v.y - m) * inv;
      v.z = __expf(v.z - m) * inv; v.w = __expf(v.w - m) * inv;
    } else {
      v = __expf(v - m) * inv;
    }
    yr[i] = v;
  }
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
  if (y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (rows > 0x7fffffff) return -2;  // one block per row: grid.x limit
  const bool vec = cols % 4 == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(yp) % 16 == 0;
  const unsigned grid = static_cast<unsigned>(rows);
  if (vec)
    softmax_block_per_row<4><<<grid, kThreads, 0, stream>>>(xp, yp, cols);
  else
    softmax_block_per_row<1><<<grid, kThreads, 0, stream>>>(xp, yp, cols);
  return static_cast<int>(cudaGetLastError());
}
