// A grid-persistent pipeline for row-wise reductions over few, very long rows (the
// split_row_resident and split_row_persistent variants of softmax and log-softmax). Each row
// needs a reduction
// (softmax's (max, sum of exp), LayerNorm's (sum, sum of squares)) before any of its outputs can
// be written. Splitting a row across blocks makes that a cross-block reduction, which the usual
// answers pay for at the sizes of KernelBench 23/24/40:
//   - two kernels (statistics, then normalize): x is read twice from DRAM (1.5x the minimum);
//   - a cluster per row with the chunk in shared memory: one read, but at most 16 blocks share a
//     row and every block alternates between a read phase and a write phase around two cluster
//     barriers (75% of copy bandwidth on the H200, bench/kernels/README.md).
// Here every block is resident for the whole call (a cooperative launch guarantees it) and owns
// one chunk of each row of its group. A block publishes its chunk's partial to a global slot and
// counts its arrival; a block that needs a row's result waits for its group's arrivals and
// combines the partials itself (a flag-based exchange as in single-pass scans: Merrill & Garland
// 2016, "Single-pass Parallel Prefix Scan with Decoupled Look-back", section 4). Two ways to keep
// the second pass off DRAM:
//   run_l2        A(row k): reduce the chunk, publish. B(row k - LAG): wait, combine, read the
//                 chunk again and write. The groups are sized so that groups * (LAG + 1) rows fit
//                 half the L2, so the second read hits L2; A(k + LAG) is issued before B(k) waits.
//   run_resident  the chunk lives in shared memory (fp32), LAG + 1 rows of it. One fused pass
//                 per row: each thread writes its elements of row k from shared memory and loads
//                 its elements of row k + LAG + 1 into the same places (the same thread owns
//                 them: no barrier), so later rows' reads and this row's writes are in flight
//                 together; then publish. With LAG >= 1 the partials a pass waits for were
//                 published a pass earlier. Needs LAG + 1 rows to fit the grid's shared memory
//                 (cols * (LAG + 1) <= blocks * ~56K floats at one block per SM).
// Reads that are the last use and the output stores carry the evict-first (".cs") hint, so they
// do not push lines that are read again out of L2; run_l2's first read is evict-last.
// Measured on the H200 (bench/kernels/README.md): run_resident reaches 80% of copy bandwidth at
// KernelBench 23/24's 4096 x 393,216 (cluster_per_row: 75%), run_l2 58% (a third of the second
// reads still miss L2). A LayerNorm on this pipeline was tried and not kept: at 16 x 4M its w and
// b (32 MiB, read once per row) did not stay in L2 (677 MB of DRAM reads for 301 MB of minimum).
//
// Workspace: static device memory of the module (no allocation per call): kSlots partials per
// block, one arrival counter per group and slot. Counters grow during a call; the last block to
// finish resets them, so the next call (same stream, in order) starts from zero. Slot reuse is
// safe with kSlots >= 2 * LAG + 2: a block reaches row k + kSlots only after every block of its
// group has finished row k's write (each block writes row j before it reduces row j + LAG + 1).
//
// The operation Op (for V-element vectors) provides:
//   struct State;                                   per-thread accumulator
//   State start(int64_t row) const;                 a fresh accumulator for the row
//   void add(State&, const float (&v)[V]) const;    folds V elements in
//   float4 finish(State&) const;                    the block's partial, valid in thread 0 (every
//                                                   thread calls it; it may use __syncthreads)
//   float4 combine(const float4* p, int n) const;   warp 0 (all 32 lanes) merges the group's n
//                                                   partials (global memory: read with __ldcg);
//                                                   the row's constants, valid in lane 0
//   struct Cols;                                    per-column operands of V elements (LayerNorm's
//                                                   w and b; empty for softmax)
//   void load_cols(Cols&, int64_t col) const;       loads them for elements col..col+V-1
//   void apply(float (&v)[V], const Cols&, float4 constants) const;
//                                                   x -> y in place
#pragma once

#include <kforge/elem.cuh>

#include <cuda/atomic>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kf::pipeline {

constexpr int kSlots = 8;
constexpr int kMaxBlocks = 4096;

__device__ float4 g_partials[kMaxBlocks * kSlots];   // [group][slot][chunk]
__device__ unsigned int g_arrived[kMaxBlocks * kSlots];  // [group][slot]
__device__ unsigned int g_finished;

/// How the rows are split: `groups` groups of `chunks` blocks; block b works on the rows
/// r = b / chunks + k * groups (k = 0, 1, ...) and on elements [c * chunk, (c + 1) * chunk) of
/// each (c = b % chunks; `chunk` a multiple of the vector width).
struct Layout {
  int64_t groups = 1;
  int64_t chunks = 1;
  int64_t chunk = 0;

  __host__ __device__ int64_t blocks() const { return groups * chunks; }
};

/// The layout given a number of chunks per row; groups take the blocks left (at most `rows`).
inline Layout layout_with(int64_t rows, int64_t cols, int64_t chunks, int64_t max_blocks,
                          int vec) {
  Layout layout;
  layout.chunks = std::clamp<int64_t>(chunks, 1, max_blocks);
  layout.groups = std::clamp<int64_t>(max_blocks / layout.chunks, 1, rows);
  const int64_t per_chunk = (cols + layout.chunks - 1) / layout.chunks;
  layout.chunk = (per_chunk + vec - 1) / vec * vec;
  return layout;
}

/// run_l2's layout for rows x cols elements of `elem_bytes` bytes, at most `max_blocks` resident
/// blocks of `threads` threads loading `vec` elements at a time: enough chunks per row that
/// groups * (lag + 1) rows fit `l2_budget` bytes, but at least one vector per thread.
inline Layout choose_l2_layout(int64_t rows, int64_t cols, int elem_bytes, int64_t max_blocks,
                               int threads, int vec, int lag, int64_t l2_budget) {
  const int64_t row_bytes = cols * elem_bytes;
  const int64_t groups_fitting = std::max<int64_t>(1, l2_budget / (row_bytes * (lag + 1)));
  const int64_t chunks_for_l2 = (max_blocks + groups_fitting - 1) / groups_fitting;
  const int64_t chunks_for_loads = std::max<int64_t>(1, cols / (int64_t{threads} * vec));
  return layout_with(rows, cols, std::min(chunks_for_l2, chunks_for_loads), max_blocks, vec);
}

/// run_resident's layout: the fewest chunks of at most `max_chunk` elements, then up to twice
/// that many if it leaves fewer of the `max_blocks` idle (groups * chunks closer to max_blocks).
/// chunks > max_blocks (the row does not fit) is returned as is: the caller must not run it.
inline Layout choose_resident_layout(int64_t rows, int64_t cols, int64_t max_blocks,
                                     int64_t max_chunk, int vec) {
  const int64_t least = (cols + max_chunk - 1) / max_chunk;
  if (least > max_blocks) {
    Layout too_long;
    too_long.chunks = least;
    return too_long;
  }
  int64_t best = least;
  for (int64_t c = least; c <= std::min(2 * least, max_blocks); ++c) {
    const int64_t used = std::min(max_blocks / c, rows) * c;
    const int64_t best_used = std::min(max_blocks / best, rows) * best;
    if (used > best_used) best = c;
  }
  return layout_with(rows, cols, best, max_blocks, vec);
}

// Loads and stores of V elements with the evict-first (streaming) cache hint, for data used once
// more at most: the raw bytes go through __ldcs/__stcs of an integer type of the pack's size.
template <int Bytes>
struct RawOf;
template <>
struct RawOf<16> { using type = int4; };
template <>
struct RawOf<8> { using type = int2; };
template <>
struct RawOf<4> { using type = int; };
template <>
struct RawOf<2> { using type = unsigned short; };

/// V elements at p (aligned to V * kElemBytes) as fp32, loaded with the evict-first hint.
template <int V>
__device__ __forceinline__ void load_vec_last(const kf_elem* p, float (&v)[V]) {
  using Raw = typename RawOf<V * kElemBytes>::type;
  const Raw raw = __ldcs(reinterpret_cast<const Raw*>(p));
  Pack<V> pack;
  memcpy(&pack, &raw, sizeof(raw));
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = to_float(pack.e[k]);
}

/// Stores V fp32 values at p (aligned to V * kElemBytes) with the evict-first hint.
template <int V>
__device__ __forceinline__ void store_vec_stream(kf_elem* p, const float (&v)[V]) {
  using Raw = typename RawOf<V * kElemBytes>::type;
  Pack<V> pack;
#pragma unroll
  for (int k = 0; k < V; ++k) pack.e[k] = from_float(v[k]);
  Raw raw;
  memcpy(&raw, &pack, sizeof(raw));
  __stcs(reinterpret_cast<Raw*>(p), raw);
}

/// An L2 access policy that marks the lines a load brings in as evict-last (kept in preference
/// to normal and evict-first lines; PTX ISA, "createpolicy").
__device__ __forceinline__ uint64_t evict_last_policy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

/// V elements at p (aligned to V * kElemBytes) as fp32, loaded under an L2 cache policy (for data
/// read again later: the chunk run_l2 re-reads, per-column operands of an op).
template <int V>
__device__ __forceinline__ void load_vec_policy(const kf_elem* p, uint64_t policy, float (&v)[V]) {
  constexpr int bytes = V * kElemBytes;
  Pack<V> pack;
  if constexpr (bytes == 16) {
    uint4 r;
    asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p), "l"(policy));
    memcpy(&pack, &r, bytes);
  } else if constexpr (bytes == 8) {
    uint2 r;
    asm("ld.global.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;"
        : "=r"(r.x), "=r"(r.y)
        : "l"(p), "l"(policy));
    memcpy(&pack, &r, bytes);
  } else if constexpr (bytes == 4) {
    unsigned int r;
    asm("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "l"(policy));
    memcpy(&pack, &r, bytes);
  } else {
    unsigned short r;
    asm("ld.global.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(r) : "l"(p), "l"(policy));
    memcpy(&pack, &r, bytes);
  }
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = to_float(pack.e[k]);
}

/// V fp32 values of the shared-memory chunk (16-, 8- or 4-byte accesses).
template <int V>
__device__ __forceinline__ void load_shared(const float* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
  } else if constexpr (V == 2) {
    const float2 t = *reinterpret_cast<const float2*>(p);
    v[0] = t.x; v[1] = t.y;
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = p[k];
  }
}

template <int V>
__device__ __forceinline__ void store_shared(float* p, const float (&v)[V]) {
  if constexpr (V == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else if constexpr (V == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) p[k] = v[k];
  }
}

/// The exchange slots of one group.
struct Slots {
  float4* partials;
  unsigned int* arrived;
  int64_t chunks;

  __device__ Slots(const Layout& layout, int64_t group)
      : partials(g_partials + group * kSlots * layout.chunks),
        arrived(g_arrived + group * kSlots),
        chunks(layout.chunks) {}

  /// Thread 0: publishes chunk c's partial of the group's k-th row and counts the arrival.
  __device__ void publish(int64_t k, int64_t c, float4 partial) const {
    const int64_t slot = k % kSlots;
    partials[slot * chunks + c] = partial;
    cuda::atomic_ref<unsigned int, cuda::thread_scope_device> counter(arrived[slot]);
    counter.fetch_add(1u, cuda::memory_order_release);
  }

  /// Every thread: waits until the group's k-th row has all its partials, combines them with
  /// `op` in warp 0 and returns the row's constants in every thread.
  template <typename Op>
  __device__ float4 gather(const Op& op, int64_t k, float4* shared_constants) const {
    const int64_t slot = k % kSlots;
    if (threadIdx.x == 0) {
      // The k-th row of the group is the (k / kSlots + 1)-th use of its slot.
      const unsigned int target = static_cast<unsigned int>((k / kSlots + 1) * chunks);
      cuda::atomic_ref<unsigned int, cuda::thread_scope_device> counter(arrived[slot]);
      while (counter.load(cuda::memory_order_acquire) < target) __nanosleep(32);
    }
    __syncthreads();  // thread 0's acquire orders warp 0's reads of the partials
    if (threadIdx.x < 32) {
      const float4 t = op.combine(partials + slot * chunks, static_cast<int>(chunks));
      if (threadIdx.x == 0) *shared_constants = t;
    }
    __syncthreads();
    const float4 constants = *shared_constants;
    __syncthreads();  // rewritten for the next row only after every thread has read it
    return constants;
  }
};

/// The last block to finish resets the arrival counters of the groups in use.
__device__ __forceinline__ void finish_call(const Layout& layout) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&g_finished, 1u) == gridDim.x - 1) {
      for (int64_t i = 0; i < layout.groups * kSlots; ++i) g_arrived[i] = 0;
      g_finished = 0;
      __threadfence();
    }
  }
}

/// The chunk of the calling block: [begin, end) of each row, and its rows (count of them).
struct Work {
  int64_t group, c, begin, end, count;

  __device__ Work(const Layout& layout, int64_t rows, int64_t cols)
      : group(blockIdx.x / layout.chunks), c(blockIdx.x % layout.chunks) {
    begin = min(cols, c * layout.chunk);
    end = min(cols, begin + layout.chunk);
    count = rows > group ? (rows - group + layout.groups - 1) / layout.groups : 0;
  }
};

/// run_l2 (see the top of the file): THREADS threads, V elements per access, U accesses in
/// flight per thread, the reduction LAG rows ahead of the write.
template <int THREADS, int V, int U, int LAG, typename Op>
__device__ __forceinline__ void run_l2(const Op& op, const Layout& layout, const kf_elem* x,
                                       kf_elem* y, int64_t rows, int64_t cols) {
  static_assert(LAG >= 0 && 2 * LAG + 2 <= kSlots, "LAG in [0, 3]");
  __shared__ float4 constants_shared;
  const Work work(layout, rows, cols);
  const Slots slots(layout, work.group);
  const int64_t nvec = (work.end - work.begin) / V;

#pragma unroll 1
  for (int64_t k = 0; k < work.count + LAG; ++k) {
    if (k < work.count) {
      const int64_t row = work.group + k * layout.groups;
      const kf_elem* xr = x + row * cols + work.begin;
      typename Op::State state = op.start(row);
      const uint64_t keep = evict_last_policy();  // read again by B(row)
      int64_t i = threadIdx.x;
#pragma unroll 1
      for (; i + (U - 1) * THREADS < nvec; i += U * THREADS) {
        float v[U][V];
#pragma unroll
        for (int u = 0; u < U; ++u) load_vec_policy<V>(xr + (i + u * THREADS) * V, keep, v[u]);
#pragma unroll
        for (int u = 0; u < U; ++u) op.add(state, v[u]);
      }
#pragma unroll 1
      for (; i < nvec; i += THREADS) {
        float v[V];
        load_vec_policy<V>(xr + i * V, keep, v);
        op.add(state, v);
      }
      const float4 partial = op.finish(state);
      if (threadIdx.x == 0) slots.publish(k, work.c, partial);
    }
    if (k >= LAG) {
      const int64_t j = k - LAG;
      const float4 constants = slots.gather(op, j, &constants_shared);
      const int64_t row = work.group + j * layout.groups;
      const kf_elem* xr = x + row * cols + work.begin;
      kf_elem* yr = y + row * cols + work.begin;
      int64_t i = threadIdx.x;
#pragma unroll 1
      for (; i + (U - 1) * THREADS < nvec; i += U * THREADS) {
        // Every load of the step (x and the per-column operands) is issued before the first
        // store: a store may alias them as far as the compiler knows, so a load after it
        // would wait for it.
        float v[U][V];
        typename Op::Cols operands[U];
#pragma unroll
        for (int u = 0; u < U; ++u) load_vec_last<V>(xr + (i + u * THREADS) * V, v[u]);
#pragma unroll
        for (int u = 0; u < U; ++u) op.load_cols(operands[u], work.begin + (i + u * THREADS) * V);
#pragma unroll
        for (int u = 0; u < U; ++u) {
          op.apply(v[u], operands[u], constants);
          store_vec_stream<V>(yr + (i + u * THREADS) * V, v[u]);
        }
      }
#pragma unroll 1
      for (; i < nvec; i += THREADS) {
        float v[V];
        typename Op::Cols operands;
        load_vec_last<V>(xr + i * V, v);
        op.load_cols(operands, work.begin + i * V);
        op.apply(v, operands, constants);
        store_vec_stream<V>(yr + i * V, v);
      }
    }
  }
  finish_call(layout);
}

/// One pass of run_resident over the block's chunk: writes `write_row` (>= 0) from `buffer`
/// and loads `load_row` (>= 0) into it, folding it into `state`. Thread t owns vectors t,
/// t + THREADS, ... in both roles, so the slot it writes from is the one it loads into: no
/// barrier between the two.
template <int THREADS, int V, int U, typename Op>
__device__ __forceinline__ void resident_pass(const Op& op, const kf_elem* xn, kf_elem* yr,
                                              int64_t begin, int64_t nvec, bool write, bool load,
                                              float* buffer, float4 constants,
                                              typename Op::State& state) {
  int64_t i = threadIdx.x;
#pragma unroll 1
  for (; i + (U - 1) * THREADS < nvec; i += U * THREADS) {
    float v[U][V];
    float o[U][V];
    typename Op::Cols operands[U];
    if (load) {
#pragma unroll
      for (int u = 0; u < U; ++u) load_vec_last<V>(xn + (i + u * THREADS) * V, v[u]);
    }
    if (write) {
      // Loads before the first store (see run_l2).
#pragma unroll
      for (int u = 0; u < U; ++u) op.load_cols(operands[u], begin + (i + u * THREADS) * V);
#pragma unroll
      for (int u = 0; u < U; ++u) load_shared<V>(buffer + (i + u * THREADS) * V, o[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        op.apply(o[u], operands[u], constants);
        store_vec_stream<V>(yr + (i + u * THREADS) * V, o[u]);
      }
    }
    if (load) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        store_shared<V>(buffer + (i + u * THREADS) * V, v[u]);
        op.add(state, v[u]);
      }
    }
  }
#pragma unroll 1
  for (; i < nvec; i += THREADS) {
    float* slot = buffer + i * V;
    float v[V];
    if (load) load_vec_last<V>(xn + i * V, v);
    if (write) {
      float o[V];
      typename Op::Cols operands;
      op.load_cols(operands, begin + i * V);
      load_shared<V>(slot, o);
      op.apply(o, operands, constants);
      store_vec_stream<V>(yr + i * V, o);
    }
    if (load) {
      store_shared<V>(slot, v);
      op.add(state, v);
    }
  }
}

/// run_resident (see the top of the file): LAG + 1 buffers of layout.chunk fp32 values in
/// `chunks_shared`; row k lives in buffer k % (LAG + 1). The pass that writes row k loads row
/// k + LAG + 1 into its buffer, so with LAG >= 1 the wait for row k's partials was issued a
/// whole pass after they were published.
template <int THREADS, int V, int U, int LAG, typename Op>
__device__ __forceinline__ void run_resident(const Op& op, const Layout& layout,
                                             const kf_elem* x, kf_elem* y, int64_t rows,
                                             int64_t cols, float* chunks_shared) {
  static_assert(LAG >= 0 && 2 * LAG + 2 <= kSlots, "LAG in [0, 3]");
  __shared__ float4 constants_shared;
  const Work work(layout, rows, cols);
  const Slots slots(layout, work.group);
  const int64_t nvec = (work.end - work.begin) / V;
  auto row_of = [&](int64_t k) { return work.group + k * layout.groups; };

  // Prologue: rows 0 .. LAG are loaded and published.
#pragma unroll 1
  for (int64_t k = 0; k <= LAG && k < work.count; ++k) {
    typename Op::State state = op.start(row_of(k));
    resident_pass<THREADS, V, U>(op, x + row_of(k) * cols + work.begin, nullptr, work.begin,
                                 nvec, false, true, chunks_shared + k * layout.chunk,
                                 make_float4(0.0f, 0.0f, 0.0f, 0.0f), state);
    const float4 partial = op.finish(state);
    if (threadIdx.x == 0) slots.publish(k, work.c, partial);
  }
#pragma unroll 1
  for (int64_t k = 0; k < work.count; ++k) {
    const float4 constants = slots.gather(op, k, &constants_shared);
    const int64_t next = k + LAG + 1;
    const bool load = next < work.count;
    typename Op::State state = op.start(load ? row_of(next) : row_of(k));
    resident_pass<THREADS, V, U>(op, x + (load ? row_of(next) : 0) * cols + work.begin,
                                 y + row_of(k) * cols + work.begin, work.begin, nvec, true, load,
                                 chunks_shared + (k % (LAG + 1)) * layout.chunk, constants,
                                 state);
    if (load) {
      const float4 partial = op.finish(state);
      if (threadIdx.x == 0) slots.publish(next, work.c, partial);
    }
  }
  finish_call(layout);
}

/// Launches `kernel` (parameters `args`) cooperatively on `blocks` blocks of `threads` threads
/// with `smem` bytes of dynamic shared memory: every block is resident at once or the launch
/// fails (cudaErrorCooperativeLaunchTooLarge) instead of deadlocking on a block that never runs.
template <typename... KernelArgs, typename... Args>
cudaError_t launch_cooperative(void (*kernel)(KernelArgs...), int64_t blocks, int threads,
                               size_t smem, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeCooperative;
  attribute[0].val.cooperative = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

/// What the current device offers a kernel: SMs, half the L2 in bytes, and the opt-in shared
/// memory per block in bytes. Returns a cudaError_t.
struct DeviceLimits {
  int sms = 0;
  int64_t l2_half = 0;
  int64_t smem_optin = 0;
  int64_t smem_per_sm = 0;
};

inline cudaError_t device_limits(DeviceLimits* limits) {
  int device = 0, sms = 0, l2 = 0, optin = 0, per_sm = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  }
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
  }
  if (err != cudaSuccess) return err;
  limits->sms = sms;
  limits->l2_half = l2 / 2;
  limits->smem_optin = optin;
  limits->smem_per_sm = per_sm;
  return cudaSuccess;
}

/// Resident blocks of `kernel` with `smem` bytes of dynamic shared memory: SMs times
/// min(blocks_per_sm, what fits), at most kMaxBlocks (0 when none fits). Returns a cudaError_t.
template <typename Kernel>
cudaError_t resident_blocks(Kernel kernel, int threads, size_t smem, int blocks_per_sm, int sms,
                            int64_t* blocks) {
  int fit = 0;
  const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, threads, smem);
  if (err != cudaSuccess) return err;
  *blocks = std::min<int64_t>(int64_t{sms} * std::min(blocks_per_sm, fit), kMaxBlocks);
  return cudaSuccess;
}

template <int THREADS, int V, int U, int LAG, int BPS, typename Op>
__global__ void __launch_bounds__(THREADS, BPS)
l2_kernel(Op op, const kf_elem* __restrict__ x, kf_elem* __restrict__ y, int64_t rows,
          int64_t cols, Layout layout) {
  run_l2<THREADS, V, U, LAG>(op, layout, x, y, rows, cols);
}

template <int THREADS, int V, int U, int LAG, int BPS, typename Op>
__global__ void __launch_bounds__(THREADS, BPS)
resident_kernel(Op op, const kf_elem* __restrict__ x, kf_elem* __restrict__ y, int64_t rows,
                int64_t cols, Layout layout) {
  extern __shared__ float4 chunk_raw[];  // float4: 16-byte aligned
  run_resident<THREADS, V, U, LAG>(op, layout, x, y, rows, cols,
                                   reinterpret_cast<float*>(chunk_raw));
}

/// Runs `op` over x [rows, cols] into y on `stream`: BPS blocks of THREADS threads per SM, V
/// elements per access (V divides cols; x and y aligned to V elements), U accesses in flight per
/// thread, LAG rows between a row's reduction and its write. RESIDENT: run_resident when the
/// row fits the grid's shared memory LAG + 1 times over (each block gets 1 / BPS of the SM's,
/// less 2 KiB), otherwise, and with RESIDENT = false, run_l2.
/// Returns a cudaError_t (cudaErrorCooperativeLaunchTooLarge if the grid cannot be resident).
template <int THREADS, int V, int U, int LAG, int BPS, bool RESIDENT, typename Op>
cudaError_t launch_rows(const Op& op, const kf_elem* x, kf_elem* y, int64_t rows, int64_t cols,
                        cudaStream_t stream) {
  DeviceLimits limits;
  cudaError_t err = device_limits(&limits);
  if (err != cudaSuccess) return err;
  if constexpr (RESIDENT) {
    auto kernel = resident_kernel<THREADS, V, U, LAG, BPS, Op>;
    const int64_t share = std::min(limits.smem_optin, limits.smem_per_sm / BPS) - 2048;
    // LAG + 1 buffers; a chunk a multiple of 4 keeps every buffer 16-byte aligned.
    const int64_t max_chunk = std::max<int64_t>(0, share / 4 / (LAG + 1) / 4 * 4 - 4);
    if (max_chunk >= V) {
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(share));
      int64_t blocks = 0;
      if (err == cudaSuccess) {
        err = resident_blocks(kernel, THREADS, static_cast<size_t>(share), BPS, limits.sms,
                              &blocks);
      }
      if (err != cudaSuccess) return err;
      const Layout layout = choose_resident_layout(rows, cols, blocks, max_chunk, 4);
      if (blocks > 0 && layout.chunks <= blocks) {
        const size_t smem = static_cast<size_t>(layout.chunk) * (LAG + 1) * sizeof(float);
        return launch_cooperative(kernel, layout.blocks(), THREADS, smem, stream, op, x, y, rows,
                                  cols, layout);
      }
    }
    // The row does not fit the grid's shared memory: re-read the chunks from L2 instead.
  }
  auto kernel = l2_kernel<THREADS, V, U, LAG, BPS, Op>;
  int64_t blocks = 0;
  err = resident_blocks(kernel, THREADS, 0, BPS, limits.sms, &blocks);
  if (err != cudaSuccess) return err;
  if (blocks == 0) return cudaErrorInvalidConfiguration;
  const Layout layout =
      choose_l2_layout(rows, cols, kElemBytes, blocks, THREADS, V, LAG, limits.l2_half);
  return launch_cooperative(kernel, layout.blocks(), THREADS, 0, stream, op, x, y, rows, cols,
                            layout);
}

}  // namespace kf::pipeline
