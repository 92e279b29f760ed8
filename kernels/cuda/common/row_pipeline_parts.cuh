// Building blocks of the grid-persistent row pipeline (kernels/cuda/common/row_pipeline.cuh, which
// says what the pipeline does and why): the workspace and its exchange slots, loads and stores
// with cache hints, cp.async, and the host side of a cooperative launch. The row layouts are in
// kernels/cuda/common/row_layout.h (plain C++, unit-tested on the CPU).
#pragma once

#include <cuda/common/elem.cuh>
#include <cuda/common/row_layout.h>

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
__device__ unsigned int g_row_ticket;  // rows handed out after the first `groups` (row tickets)

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

/// V elements at p as fp32 through the read-only path (ld.global.nc) with no eviction hint: for
/// run_resident's x, which nothing reads again. On the H200 at KernelBench 23's shape this
/// streams 3% faster than the evict-first load_vec_last (bench/kernels/README.md).
template <int V>
__device__ __forceinline__ void load_vec_once(const kf_elem* p, float (&v)[V]) {
  using Raw = typename RawOf<V * kElemBytes>::type;
  const Raw raw = __ldg(reinterpret_cast<const Raw*>(p));
  Pack<V> pack;
  memcpy(&pack, &raw, sizeof(raw));
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = to_float(pack.e[k]);
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

/// Copies `Bytes` (4, 8 or 16) from global to shared memory without a register (cp.async,
/// sm_80+; 16-byte copies bypass L1). Completion: copy_async_wait_all.
template <int Bytes>
__device__ __forceinline__ void copy_async(void* shared, const void* global) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned int address = static_cast<unsigned int>(__cvta_generic_to_shared(shared));
  if constexpr (Bytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(address), "l"(global)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(address), "l"(global),
                 "n"(Bytes)
                 : "memory");
  }
}

/// Waits for every cp.async the calling thread issued.
__device__ __forceinline__ void copy_async_wait_all() {
  asm volatile("cp.async.wait_all;" ::: "memory");
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

  /// Thread 0, after gather(k): the group's next row, which the leader (chunk 0) put in the w
  /// component of its partial of the k-th row (row tickets).
  __device__ int64_t next_row(int64_t k) const {
    const float4 leader = __ldcg(partials + (k % kSlots) * chunks);
    return __float_as_int(leader.w);
  }
};

/// The last block to finish resets the arrival counters of the groups in use and the row ticket.
__device__ __forceinline__ void finish_call(const Layout& layout) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&g_finished, 1u) == gridDim.x - 1) {
      for (int64_t i = 0; i < layout.groups * kSlots; ++i) g_arrived[i] = 0;
      g_row_ticket = 0;
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

}  // namespace kf::pipeline
