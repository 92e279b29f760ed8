// Which order of work lets a grid of resident (persistent) blocks stream at the copy rate?
// The fourth session measured, at KernelBench 23's size (4096 x 393216 f32, 6.44 GB each way),
// a one-float4-per-thread copy with a fresh block per 256 threads at 4.27 TB/s and grid-stride
// copies at 83-89%; the persistent softmax pipeline sat at 85%. This program times copy
// variants that differ only in how a resident grid orders its tiles:
//   fresh     one tile per block, a fresh block per tile (the hardware's launch order)
//   stride    resident blocks, tile = block + k * grid (grid-stride)
//   ticket    resident blocks, each takes the next tile from a global counter (atomicAdd), so the
//             tiles in flight are always the next ones in address order, as with fresh blocks
//   chunk     resident blocks, block b owns one contiguous range of tiles (grid streams at once)
// A tile is 256 threads x U float4 (loads of the tile issued before its stores).
// Build and run on the GPU machine:
//   nvcc -std=c++17 -O3 -arch=sm_90 bench/kernels/persistent_copy.cu -o persistent_copy
//   ./persistent_copy [ROWS COLS [trace]]   (default 4096 393216; `trace`: when each block of the
//   static assignments ends, and on which SM)
// Prints median and min over 15 calls, each after a 256 MiB write that evicts L2.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "persistent_copy: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(2);
  }
}

constexpr int kThreads = 256;

template <int U>
__device__ __forceinline__ void copy_tile(const float4* __restrict__ x, float4* __restrict__ y,
                                          int64_t tile, int64_t n4) {
  const int64_t base = tile * (kThreads * U) + threadIdx.x;
  float4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = base + int64_t{u} * kThreads;
    if (i < n4) v[u] = __ldg(x + i);
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = base + int64_t{u} * kThreads;
    if (i < n4) y[i] = v[u];
  }
}

template <int U>
__global__ void __launch_bounds__(kThreads) fresh(const float4* x, float4* y, int64_t n4) {
  copy_tile<U>(x, y, blockIdx.x, n4);
}

template <int U>
__global__ void __launch_bounds__(kThreads) stride(const float4* x, float4* y, int64_t n4,
                                                  int64_t tiles) {
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) copy_tile<U>(x, y, t, n4);
}

template <int U>
__global__ void __launch_bounds__(kThreads) ticket(const float4* x, float4* y, int64_t n4,
                                                  int64_t tiles, unsigned long long* counter) {
  __shared__ int64_t next[2];
  int parity = 0;
  if (threadIdx.x == 0) next[0] = static_cast<int64_t>(atomicAdd(counter, 1ull));
  __syncthreads();
  for (;;) {
    const int64_t t = next[parity];
    if (t >= tiles) break;
    // Take the following ticket before copying, so the counter is not on the tile's path.
    if (threadIdx.x == 0) next[parity ^ 1] = static_cast<int64_t>(atomicAdd(counter, 1ull));
    copy_tile<U>(x, y, t, n4);
    __syncthreads();
    parity ^= 1;
  }
}

// ticket with K consecutive tiles per ticket (a block streams a K-tile chunk, then takes the
// next chunk): the order of the persistent softmax's chunks.
template <int U, int K>
__global__ void __launch_bounds__(kThreads) ticket_chunk(const float4* x, float4* y, int64_t n4,
                                                        int64_t tiles,
                                                        unsigned long long* counter) {
  __shared__ int64_t next;
  for (;;) {
    if (threadIdx.x == 0) next = static_cast<int64_t>(atomicAdd(counter, 1ull));
    __syncthreads();
    const int64_t t = next * K;
    __syncthreads();
    if (t >= tiles) break;
    for (int k = 0; k < K && t + k < tiles; ++k) copy_tile<U>(x, y, t + k, n4);
  }
}

template <int U>
__global__ void __launch_bounds__(kThreads) chunk(const float4* x, float4* y, int64_t n4,
                                                 int64_t tiles) {
  const int64_t begin = tiles * blockIdx.x / gridDim.x;
  const int64_t end = tiles * (blockIdx.x + 1) / gridDim.x;
  for (int64_t t = begin; t < end; ++t) copy_tile<U>(x, y, t, n4);
}

struct Timer {
  cudaStream_t stream;
  unsigned char* flush;
  int64_t flush_bytes;
  double bytes;
};

template <typename Launch>
void time_variant(const char* name, const Timer& timer, Launch&& launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::vector<float> ms;
  for (int it = 0; it < 17; ++it) {
    check(cudaMemsetAsync(timer.flush, it & 0xff, timer.flush_bytes, timer.stream), "flush");
    check(cudaEventRecord(start, timer.stream), "record");
    launch();
    check(cudaGetLastError(), name);
    check(cudaEventRecord(stop, timer.stream), "record");
    check(cudaEventSynchronize(stop), name);
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "elapsed");
    if (it >= 2) ms.push_back(t);  // two warm-up calls
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  std::printf("%-28s median %.4f ms  min %.4f ms  %.0f GB/s\n", name, median, ms.front(),
              timer.bytes / (median * 1e-3) / 1e9);
  std::fflush(stdout);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned int sm_id() {
  unsigned int id;
  asm volatile("mov.u32 %0, %smid;" : "=r"(id));
  return id;
}

// Every thread, once the block's copies are issued: thread 0 records the block's SM, its start
// time `start` and its end time (ns) in trace[3 * block ..].
__device__ __forceinline__ void record_block(unsigned long long* trace, uint64_t start) {
  __syncthreads();
  if (threadIdx.x == 0) {
    trace[3 * blockIdx.x] = sm_id();
    trace[3 * blockIdx.x + 1] = start;
    trace[3 * blockIdx.x + 2] = global_ns();
  }
}

// `chunk` or `stride` (STRIDE) with each block's SM and start / end times (ns) recorded.
template <int U, bool STRIDE>
__global__ void __launch_bounds__(kThreads) traced(const float4* x, float4* y, int64_t n4,
                                                  int64_t tiles, unsigned long long* trace) {
  const uint64_t start = global_ns();
  if (STRIDE) {
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) copy_tile<U>(x, y, t, n4);
  } else {
    const int64_t begin = tiles * blockIdx.x / gridDim.x;
    const int64_t end = tiles * (blockIdx.x + 1) / gridDim.x;
    for (int64_t t = begin; t < end; ++t) copy_tile<U>(x, y, t, n4);
  }
  record_block(trace, start);
}

// A static contiguous assignment whose shares follow per-SM weights: each block publishes its SM,
// the grid synchronizes once, and block b takes tiles in proportion to weight[sm of b] after the
// blocks before it (cooperative launch). With weights from a trace of the same grid, every block
// should end at the same time.
template <int U>
__global__ void __launch_bounds__(kThreads) weighted(const float4* x, float4* y, int64_t n4,
                                                    int64_t tiles, const float* weight,
                                                    unsigned int* block_sm,
                                                    unsigned long long* trace) {
  const uint64_t start = global_ns();
  if (threadIdx.x == 0) block_sm[blockIdx.x] = sm_id();
  cooperative_groups::this_grid().sync();
  __shared__ double range[2];
  if (threadIdx.x < 32) {
    double before = 0.0, total = 0.0;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += 32) {
      const double w = weight[block_sm[b]];
      total += w;
      if (b < blockIdx.x) before += w;
    }
    for (int o = 16; o > 0; o >>= 1) {
      before += __shfl_xor_sync(0xffffffffu, before, o);
      total += __shfl_xor_sync(0xffffffffu, total, o);
    }
    if (threadIdx.x == 0) {
      range[0] = before / total;
      range[1] = (before + weight[block_sm[blockIdx.x]]) / total;
    }
  }
  __syncthreads();
  const int64_t begin = blockIdx.x == 0 ? 0 : static_cast<int64_t>(range[0] * tiles + 0.5);
  const int64_t end =
      blockIdx.x == gridDim.x - 1 ? tiles : static_cast<int64_t>(range[1] * tiles + 0.5);
  for (int64_t t = begin; t < end; ++t) copy_tile<U>(x, y, t, n4);
  record_block(trace, start);
}

// Prints how unevenly the blocks of a static assignment finish: end times relative to the first
// start (min, 10th, 50th, 90th percentile, max) and the 4 slowest and fastest SMs (mean end).
void summarize_trace(const char* name, int U, int grid, const unsigned long long* trace,
                     std::vector<float>* sm_time);

template <int U, bool STRIDE>
void trace_variant(cudaStream_t stream, const float4* x, float4* y, int64_t n4, int grid,
                   std::vector<float>* sm_time = nullptr) {
  const int64_t tiles = (n4 + kThreads * U - 1) / (kThreads * U);
  unsigned long long* trace = nullptr;
  check(cudaMalloc(&trace, sizeof(unsigned long long) * 3 * grid), "cudaMalloc trace");
  for (int it = 0; it < 3; ++it) {
    traced<U, STRIDE><<<grid, kThreads, 0, stream>>>(x, y, n4, tiles, trace);
  }
  check(cudaStreamSynchronize(stream), "traced");
  std::vector<unsigned long long> h(3 * grid);
  check(cudaMemcpy(h.data(), trace, sizeof(unsigned long long) * h.size(),
                   cudaMemcpyDeviceToHost), "copy trace");
  summarize_trace(STRIDE ? "stride" : "chunk", U, grid, h.data(), sm_time);
  cudaFree(trace);
}

void summarize_trace(const char* name, int U, int grid, const unsigned long long* trace,
                     std::vector<float>* sm_time) {
  const unsigned long long* h = trace;
  unsigned long long first = ~0ull;
  for (int b = 0; b < grid; ++b) first = std::min(first, h[3 * b + 1]);
  std::vector<double> ends;
  std::vector<double> sm_sum(1024, 0.0), sm_n(1024, 0.0);
  for (int b = 0; b < grid; ++b) {
    const double e = (h[3 * b + 2] - first) * 1e-6;
    ends.push_back(e);
    sm_sum[h[3 * b]] += e;
    sm_n[h[3 * b]] += 1;
  }
  std::sort(ends.begin(), ends.end());
  auto q = [&](double f) { return ends[static_cast<size_t>(f * (ends.size() - 1))]; };
  std::printf("trace %s U%d %d blocks: block end ms min %.3f p10 %.3f p50 %.3f p90 %.3f max %.3f\n",
              name, U, grid, q(0), q(0.1), q(0.5), q(0.9), q(1.0));
  std::vector<std::pair<double, int>> sms;
  for (int i = 0; i < 1024; ++i) {
    if (sm_n[i] > 0) sms.push_back({sm_sum[i] / sm_n[i], i});
  }
  std::sort(sms.begin(), sms.end());
  std::printf("  fastest SMs (mean end ms):");
  for (size_t i = 0; i < 4 && i < sms.size(); ++i) std::printf(" %d:%.3f", sms[i].second, sms[i].first);
  std::printf("  slowest:");
  for (size_t i = sms.size() >= 4 ? sms.size() - 4 : 0; i < sms.size(); ++i) {
    std::printf(" %d:%.3f", sms[i].second, sms[i].first);
  }
  std::printf("\n  every SM (id:mean end ms):");
  for (int i = 0; i < 1024; ++i) {
    if (sm_n[i] > 0) std::printf(" %d:%.3f", i, sm_sum[i] / sm_n[i]);
  }
  std::printf("\n");
  std::fflush(stdout);
  if (sm_time) {
    sm_time->assign(1024, 0.0f);
    for (int i = 0; i < 1024; ++i) {
      if (sm_n[i] > 0) (*sm_time)[i] = static_cast<float>(sm_sum[i] / sm_n[i]);
    }
  }
}

// Traces the static chunk assignment, then runs and times the weighted one with weights
// 1 / (the SM's mean end time in the trace).
template <int U>
void weighted_variant(const Timer& timer, const float4* x, float4* y, int64_t n4, int grid) {
  std::vector<float> sm_time;
  trace_variant<U, false>(timer.stream, x, const_cast<float4*>(y), n4, grid, &sm_time);
  std::vector<float> weight(1024, 0.0f);
  for (int i = 0; i < 1024; ++i) weight[i] = sm_time[i] > 0 ? 1.0f / sm_time[i] : 0.0f;
  float* weight_d = nullptr;
  unsigned int* block_sm = nullptr;
  unsigned long long* trace = nullptr;
  check(cudaMalloc(&weight_d, sizeof(float) * 1024), "cudaMalloc weight");
  check(cudaMalloc(&block_sm, sizeof(unsigned int) * grid), "cudaMalloc block_sm");
  check(cudaMalloc(&trace, sizeof(unsigned long long) * 3 * grid), "cudaMalloc trace");
  check(cudaMemcpy(weight_d, weight.data(), sizeof(float) * 1024, cudaMemcpyHostToDevice),
        "copy weight");
  int64_t tiles = (n4 + kThreads * U - 1) / (kThreads * U);
  void* args[] = {&x, &y, &n4, &tiles, &weight_d, &block_sm, &trace};
  auto launch = [&] {
    check(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(weighted<U>), grid, kThreads, args,
                                      0, timer.stream),
          "weighted launch");
  };
  char name[64];
  std::snprintf(name, sizeof name, "weighted U%d %d blocks", U, grid);
  time_variant(name, timer, launch);
  std::vector<unsigned long long> h(3 * grid);
  check(cudaMemcpy(h.data(), trace, sizeof(unsigned long long) * h.size(),
                   cudaMemcpyDeviceToHost), "copy trace");
  summarize_trace("weighted", U, grid, h.data(), nullptr);
  cudaFree(weight_d);
  cudaFree(block_sm);
  cudaFree(trace);
}

template <int U>
void run_all(const Timer& timer, const float4* x, float4* y, int64_t n4,
             unsigned long long* counter, int sms) {
  const int64_t tiles = (n4 + kThreads * U - 1) / (kThreads * U);
  char name[64];
  std::snprintf(name, sizeof name, "fresh U%d", U);
  time_variant(name, timer, [&] {
    fresh<U><<<static_cast<unsigned>(tiles), kThreads, 0, timer.stream>>>(x, y, n4);
  });
  for (int per_sm : {2, 4, 8}) {
    const int grid = sms * per_sm;
    std::snprintf(name, sizeof name, "stride U%d %dx256", U, per_sm);
    time_variant(name, timer, [&] {
      stride<U><<<grid, kThreads, 0, timer.stream>>>(x, y, n4, tiles);
    });
    std::snprintf(name, sizeof name, "ticket U%d %dx256", U, per_sm);
    time_variant(name, timer, [&] {
      cudaMemsetAsync(counter, 0, sizeof *counter, timer.stream);
      ticket<U><<<grid, kThreads, 0, timer.stream>>>(x, y, n4, tiles, counter);
    });
    std::snprintf(name, sizeof name, "chunk U%d %dx256", U, per_sm);
    time_variant(name, timer, [&] {
      chunk<U><<<grid, kThreads, 0, timer.stream>>>(x, y, n4, tiles);
    });
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = argc > 2 ? std::atoll(argv[1]) : 4096;
  const int64_t cols = argc > 2 ? std::atoll(argv[2]) : 393216;
  const int64_t n = rows * cols;
  const int64_t n4 = n / 4;
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  float4 *x = nullptr, *y = nullptr;
  unsigned long long* counter = nullptr;
  Timer timer{};
  timer.flush_bytes = int64_t{256} << 20;
  timer.bytes = 2.0 * static_cast<double>(n4) * sizeof(float4);
  check(cudaMalloc(&x, n4 * sizeof(float4)), "cudaMalloc x");
  check(cudaMalloc(&y, n4 * sizeof(float4)), "cudaMalloc y");
  check(cudaMalloc(&counter, sizeof *counter), "cudaMalloc counter");
  check(cudaMalloc(&timer.flush, timer.flush_bytes), "cudaMalloc flush");
  check(cudaMemset(x, 0x3f, n4 * sizeof(float4)), "memset x");
  check(cudaStreamCreate(&timer.stream), "stream");
  std::printf("# persistent_copy %lld x %lld f32, %d SMs, %.2f GB moved per call\n",
              static_cast<long long>(rows), static_cast<long long>(cols), sms, timer.bytes / 1e9);
  time_variant("cudaMemcpy d2d", timer, [&] {
    cudaMemcpyAsync(y, x, n4 * sizeof(float4), cudaMemcpyDeviceToDevice, timer.stream);
  });
  if (argc > 3) {  // ROWS COLS trace: only the block-end traces of the static assignments
    trace_variant<4, false>(timer.stream, x, y, n4, sms * 2);
    trace_variant<4, false>(timer.stream, x, y, n4, sms * 8);
    trace_variant<4, true>(timer.stream, x, y, n4, sms * 2);
    trace_variant<4, true>(timer.stream, x, y, n4, sms * 8);
    const int64_t tiles4 = (n4 + kThreads * 4 - 1) / (kThreads * 4);
    for (int per_sm : {2, 4}) {
      const int grid = sms * per_sm;
      char name[64];
      std::snprintf(name, sizeof name, "ticket U4 K1 %dx256", per_sm);
      time_variant(name, timer, [&] {
        cudaMemsetAsync(counter, 0, sizeof *counter, timer.stream);
        ticket_chunk<4, 1><<<grid, kThreads, 0, timer.stream>>>(x, y, n4, tiles4, counter);
      });
      std::snprintf(name, sizeof name, "ticket U4 K4 %dx256", per_sm);
      time_variant(name, timer, [&] {
        cudaMemsetAsync(counter, 0, sizeof *counter, timer.stream);
        ticket_chunk<4, 4><<<grid, kThreads, 0, timer.stream>>>(x, y, n4, tiles4, counter);
      });
      std::snprintf(name, sizeof name, "ticket U4 K16 %dx256", per_sm);
      time_variant(name, timer, [&] {
        cudaMemsetAsync(counter, 0, sizeof *counter, timer.stream);
        ticket_chunk<4, 16><<<grid, kThreads, 0, timer.stream>>>(x, y, n4, tiles4, counter);
      });
    }
    weighted_variant<4>(timer, x, y, n4, sms * 2);
    time_variant("cudaMemcpy d2d", timer, [&] {
      cudaMemcpyAsync(y, x, n4 * sizeof(float4), cudaMemcpyDeviceToDevice, timer.stream);
    });
    return 0;
  }
  run_all<1>(timer, x, y, n4, counter, sms);
  run_all<4>(timer, x, y, n4, counter, sms);
  run_all<8>(timer, x, y, n4, counter, sms);
  return 0;
}
