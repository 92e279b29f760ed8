// A grid-persistent pipeline for row-wise reductions over few, very long rows (the
// split_row_resident variants of softmax and log-softmax). Each row
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
//                 (cols * (LAG + 1) <= blocks * ~56K floats at one block per SM). With ASYNC the
//                 loads are cp.async straight into an element-typed buffer: a thread issues the
//                 copies of its whole share of the next row without waiting (no registers hold
//                 them), waits once at the end of the pass and then folds its slots from shared
//                 memory; without it each UNROLL-deep batch of loads is waited for in turn.
// In run_l2, reads that are the last use and the output stores carry the evict-first (".cs")
// hint, so they do not push lines that are read again out of L2, and the first read is
// evict-last. run_resident re-reads nothing from L2: loading through registers, its loads go
// through the read-only path and its stores are plain (4% faster at KernelBench 23's shape than
// with the evict-first hints); with cp.async the stores keep the hint (plain ones were 2-5%
// slower for bf16 there). Measured on the H200, bench/kernels/README.md.
// Row order: with LAG 0, groups take rows by ticket (run_resident's ROW_TICKETS), so the rows in
// flight are always the next ones; a resident grid that walks fixed sequences drifts apart and
// streams slower (bench/kernels/persistent_copy.cu on the H200: 88-89% of copy against 97% for
// tiles taken in order).
// Measured on the H200 (bench/kernels/README.md): run_resident reaches 95% of copy bandwidth
// at KernelBench 23/24's 4096 x 393,216 with row tickets and chunks of whole steps
// (choose_resident_layout), 85-86% with neither (cluster_per_row: 75%), run_l2 58% (a third of the second
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
//                                                   thread calls it; it may use __syncthreads);
//                                                   its w component belongs to the pipeline
//                                                   (row tickets) and combine must ignore it
//   float4 combine(const float4* p, int n) const;   warp 0 (all 32 lanes) merges the group's n
//                                                   partials (global memory: read with __ldcg);
//                                                   the row's constants, valid in lane 0
//   struct Cols;                                    per-column operands of V elements (LayerNorm's
//                                                   w and b; empty for softmax)
//   void load_cols(Cols&, int64_t col) const;       loads them for elements col..col+V-1
//   void apply(float (&v)[V], const Cols&, float4 constants) const;
//                                                   x -> y in place
#pragma once

#include <cuda/common/row_pipeline_parts.cuh>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace kf::pipeline {

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

/// One U-vector step of resident_pass at vector i (thread-strided: i, i + THREADS, ...). FULL:
/// all U vectors exist; otherwise (the chunk's last, partial step) each access is guarded, and
/// the ones that exist are still all in flight at once rather than one round trip each.
template <int THREADS, int V, int U, bool FULL, typename Op>
__device__ __forceinline__ void resident_step(const Op& op, const kf_elem* xn, kf_elem* yr,
                                              int64_t begin, int64_t nvec, int64_t i, bool write,
                                              bool load, float* buffer, float4 constants,
                                              typename Op::State& state) {
  auto exists = [&](int u) { return FULL || i + u * THREADS < nvec; };
  float v[U][V];
  float o[U][V];
  typename Op::Cols operands[U];
  if (load) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (exists(u)) load_vec_once<V>(xn + (i + u * THREADS) * V, v[u]);
    }
  }
  if (write) {
    // Loads before the first store (see run_l2).
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (exists(u)) op.load_cols(operands[u], begin + (i + u * THREADS) * V);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (exists(u)) load_shared<V>(buffer + (i + u * THREADS) * V, o[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (exists(u)) {
        op.apply(o[u], operands[u], constants);
        kf::store_vec<V>(yr + (i + u * THREADS) * V, o[u]);
      }
    }
  }
  if (load) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (exists(u)) {
        store_shared<V>(buffer + (i + u * THREADS) * V, v[u]);
        op.add(state, v[u]);
      }
    }
  }
}

/// One pass of run_resident over the block's chunk: writes a row from `buffer` (write) and loads
/// the next into it (load), folding it into `state`. Thread t owns vectors t, t + THREADS, ... in
/// both roles, so the slot it writes from is the one it loads into: no barrier between the two.
template <int THREADS, int V, int U, typename Op>
__device__ __forceinline__ void resident_pass(const Op& op, const kf_elem* xn, kf_elem* yr,
                                              int64_t begin, int64_t nvec, bool write, bool load,
                                              float* buffer, float4 constants,
                                              typename Op::State& state) {
  int64_t i = threadIdx.x;
#pragma unroll 1
  for (; i + (U - 1) * THREADS < nvec; i += U * THREADS) {
    resident_step<THREADS, V, U, true>(op, xn, yr, begin, nvec, i, write, load, buffer,
                                       constants, state);
  }
  // At most U - 1 of this thread's vectors are left.
  if (i < nvec) {
    resident_step<THREADS, V, U, false>(op, xn, yr, begin, nvec, i, write, load, buffer,
                                        constants, state);
  }
}

/// resident_pass with the loads as cp.async straight into the element-typed buffer: a thread
/// reads a slot of row k, writes its output, then issues the copy of row k + LAG + 1 into it, and
/// never waits for DRAM inside the loop (the whole chunk is in flight at once, with no registers
/// held for it); it waits once at the end, then folds its own slots into `state` from shared
/// memory. The output store of a slot depends on the slot's shared-memory read, and the copy
/// into the slot is issued after that store, so the copy cannot overtake the read.
template <int THREADS, int V, int U, typename Op>
__device__ __forceinline__ void resident_pass_async(const Op& op, const kf_elem* xn, kf_elem* yr,
                                                    int64_t begin, int64_t nvec, bool write,
                                                    bool load, kf_elem* buffer, float4 constants,
                                                    typename Op::State& state) {
  constexpr int kBytes = V * kElemBytes;
  int64_t i = threadIdx.x;
#pragma unroll 1
  for (; i + (U - 1) * THREADS < nvec; i += U * THREADS) {
    if (write) {
      float o[U][V];
      typename Op::Cols operands[U];
#pragma unroll
      for (int u = 0; u < U; ++u) op.load_cols(operands[u], begin + (i + u * THREADS) * V);
#pragma unroll
      for (int u = 0; u < U; ++u) kf::load_vec<V>(buffer + (i + u * THREADS) * V, o[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        op.apply(o[u], operands[u], constants);
        store_vec_stream<V>(yr + (i + u * THREADS) * V, o[u]);
      }
    }
    if (load) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        copy_async<kBytes>(buffer + (i + u * THREADS) * V, xn + (i + u * THREADS) * V);
      }
    }
  }
#pragma unroll 1
  for (; i < nvec; i += THREADS) {
    if (write) {
      float o[V];
      typename Op::Cols operands;
      op.load_cols(operands, begin + i * V);
      kf::load_vec<V>(buffer + i * V, o);
      op.apply(o, operands, constants);
      store_vec_stream<V>(yr + i * V, o);
    }
    if (load) copy_async<kBytes>(buffer + i * V, xn + i * V);
  }
  if (load) {
    copy_async_wait_all();
    int64_t j = threadIdx.x;
#pragma unroll 1
    for (; j + 3 * THREADS < nvec; j += 4 * THREADS) {
      float v[4][V];
#pragma unroll
      for (int u = 0; u < 4; ++u) kf::load_vec<V>(buffer + (j + u * THREADS) * V, v[u]);
#pragma unroll
      for (int u = 0; u < 4; ++u) op.add(state, v[u]);
    }
#pragma unroll 1
    for (; j < nvec; j += THREADS) {
      float v[V];
      kf::load_vec<V>(buffer + j * V, v);
      op.add(state, v);
    }
  }
}

/// run_resident (see the top of the file): LAG + 1 buffers of layout.chunk values in
/// `chunks_shared` (fp32, or the element type with ASYNC); row k lives in buffer k % (LAG + 1).
/// The pass that writes row k loads row k + LAG + 1 into its buffer, so with LAG >= 1 the wait
/// for row k's partials was issued a whole pass after they were published.
/// ROW_TICKETS (with LAG 0): the group's k-th row is not group + k * groups but a ticket: the
/// group's leader (chunk 0) takes the next row from a global counter when it publishes its
/// partial of row k - 1 and carries it in the partial's w component, so the whole group learns
/// its next row from the exchange it waits for anyway. Rows are then started in order by
/// whichever group is free, instead of each group walking a fixed sequence and drifting away
/// from the others.
template <int THREADS, int V, int U, int LAG, bool ASYNC, bool ROW_TICKETS, typename Op>
__device__ __forceinline__ void run_resident(const Op& op, const Layout& layout,
                                             const kf_elem* x, kf_elem* y, int64_t rows,
                                             int64_t cols, void* chunks_shared) {
  static_assert(LAG >= 0 && 2 * LAG + 2 <= kSlots, "LAG in [0, 3]");
  static_assert(!ROW_TICKETS || LAG == 0, "row tickets need LAG 0");
  using Slot = std::conditional_t<ASYNC, kf_elem, float>;
  __shared__ float4 constants_shared;
  __shared__ int64_t next_row_shared;
  const Work work(layout, rows, cols);
  const Slots slots(layout, work.group);
  const int64_t nvec = (work.end - work.begin) / V;
  Slot* buffers = static_cast<Slot*>(chunks_shared);
  auto sweep = [&](const kf_elem* xn, kf_elem* yr, bool write, bool load, Slot* buffer,
                   float4 constants, typename Op::State& state) {
    if constexpr (ASYNC) {
      resident_pass_async<THREADS, V, U>(op, xn, yr, work.begin, nvec, write, load, buffer,
                                         constants, state);
    } else {
      resident_pass<THREADS, V, U>(op, xn, yr, work.begin, nvec, write, load, buffer, constants,
                                   state);
    }
  };
  // Thread 0: publishes the group's k-th row's partial; with row tickets the leader adds the
  // group's (k + 1)-th row.
  auto publish = [&](int64_t k, float4 partial) {
    if (threadIdx.x != 0) return;
    if (ROW_TICKETS && work.c == 0) {
      const unsigned int ticket = atomicAdd(&g_row_ticket, 1u);
      partial.w = __int_as_float(static_cast<int>(layout.groups + ticket));
    }
    slots.publish(k, work.c, partial);
  };
  const float4 none = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  if constexpr (ROW_TICKETS) {
    int64_t row = work.group;  // < rows: the layout has at most `rows` groups
    {
      typename Op::State state = op.start(row);
      sweep(x + row * cols + work.begin, nullptr, false, true, buffers, none, state);
      publish(0, op.finish(state));
    }
#pragma unroll 1
    for (int64_t k = 0;; ++k) {
      const float4 constants = slots.gather(op, k, &constants_shared);
      if (threadIdx.x == 0) next_row_shared = slots.next_row(k);
      __syncthreads();
      const int64_t next = next_row_shared;
      __syncthreads();  // rewritten after the next gather only
      const bool load = next < rows;
      typename Op::State state = op.start(load ? next : row);
      sweep(x + (load ? next : 0) * cols + work.begin, y + row * cols + work.begin, true, load,
            buffers, constants, state);
      if (!load) break;
      publish(k + 1, op.finish(state));
      row = next;
    }
  } else {
    auto row_of = [&](int64_t k) { return work.group + k * layout.groups; };
    // Prologue: rows 0 .. LAG are loaded and published.
#pragma unroll 1
    for (int64_t k = 0; k <= LAG && k < work.count; ++k) {
      typename Op::State state = op.start(row_of(k));
      sweep(x + row_of(k) * cols + work.begin, nullptr, false, true, buffers + k * layout.chunk,
            none, state);
      publish(k, op.finish(state));
    }
#pragma unroll 1
    for (int64_t k = 0; k < work.count; ++k) {
      const float4 constants = slots.gather(op, k, &constants_shared);
      const int64_t next = k + LAG + 1;
      const bool load = next < work.count;
      typename Op::State state = op.start(load ? row_of(next) : row_of(k));
      sweep(x + (load ? row_of(next) : 0) * cols + work.begin, y + row_of(k) * cols + work.begin,
            true, load, buffers + (k % (LAG + 1)) * layout.chunk, constants, state);
      if (load) publish(next, op.finish(state));
    }
  }
  finish_call(layout);
}

template <int THREADS, int V, int U, int LAG, int BPS, typename Op>
__global__ void __launch_bounds__(THREADS, BPS)
l2_kernel(Op op, const kf_elem* __restrict__ x, kf_elem* __restrict__ y, int64_t rows,
          int64_t cols, Layout layout) {
  run_l2<THREADS, V, U, LAG>(op, layout, x, y, rows, cols);
}

template <int THREADS, int V, int U, int LAG, int BPS, bool ASYNC, bool ROW_TICKETS, typename Op>
__global__ void __launch_bounds__(THREADS, BPS)
resident_kernel(Op op, const kf_elem* __restrict__ x, kf_elem* __restrict__ y, int64_t rows,
                int64_t cols, Layout layout) {
  extern __shared__ float4 chunk_raw[];  // float4: 16-byte aligned
  run_resident<THREADS, V, U, LAG, ASYNC, ROW_TICKETS>(op, layout, x, y, rows, cols, chunk_raw);
}

/// Runs `op` over x [rows, cols] into y on `stream`: BPS blocks of THREADS threads per SM, V
/// elements per access (V divides cols; x and y aligned to V elements), U accesses in flight per
/// thread, LAG rows between a row's reduction and its write. RESIDENT: run_resident when the
/// row fits the grid's shared memory LAG + 1 times over (each block gets 1 / BPS of the SM's,
/// less 2 KiB), otherwise, and with RESIDENT = false, run_l2. ROW_TICKETS: run_resident takes
/// rows by ticket (LAG 0 only; the fixed order otherwise and in run_l2).
/// Returns a cudaError_t (cudaErrorCooperativeLaunchTooLarge if the grid cannot be resident).
template <int THREADS, int V, int U, int LAG, int BPS, bool RESIDENT, bool ASYNC,
          bool ROW_TICKETS, typename Op>
cudaError_t launch_rows(const Op& op, const kf_elem* x, kf_elem* y, int64_t rows, int64_t cols,
                        cudaStream_t stream) {
  DeviceLimits limits;
  cudaError_t err = device_limits(&limits);
  if (err != cudaSuccess) return err;
  if constexpr (RESIDENT) {
    // cp.async moves 4, 8 or 16 bytes: a 2-byte vector (VEC = 1 of a half type) loads through
    // registers.
    constexpr bool kAsync = ASYNC && V * kElemBytes >= 4;
    constexpr int64_t kSlotBytes = kAsync ? kElemBytes : 4;
    // A ticket travels as a 32-bit integer: more rows than that take the fixed order.
    const bool tickets = ROW_TICKETS && LAG == 0 && rows <= INT32_MAX - kMaxBlocks;
    auto kernel = tickets ? resident_kernel<THREADS, V, U, LAG, BPS, kAsync, LAG == 0, Op>
                          : resident_kernel<THREADS, V, U, LAG, BPS, kAsync, false, Op>;
    const int64_t share = std::min(limits.smem_optin, limits.smem_per_sm / BPS) - 2048;
    // LAG + 1 buffers; a chunk a multiple of 8 elements keeps every buffer 16-byte aligned.
    const int64_t max_chunk =
        std::max<int64_t>(0, share / kSlotBytes / (LAG + 1) / 8 * 8 - 8);
    if (max_chunk >= V) {
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(share));
      int64_t blocks = 0;
      if (err == cudaSuccess) {
        err = resident_blocks(kernel, THREADS, static_cast<size_t>(share), BPS, limits.sms,
                              &blocks);
      }
      if (err != cudaSuccess) return err;
      const Layout layout =
          choose_resident_layout(rows, cols, blocks, max_chunk, 8, int64_t{THREADS} * U * V);
      if (blocks > 0 && layout.chunks <= blocks) {
        const size_t smem = static_cast<size_t>(layout.chunk) * (LAG + 1) * kSlotBytes;
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
