// Softmax and log-softmax over the last dimension on the grid-persistent row pipeline
// (kernels/cuda/common/row_pipeline.cuh), shared by kernels/cuda/softmax/split_row_resident.cu
// and kernels/cuda/log_softmax/split_row_resident.cu, which pass their output functor to run<>
// (kernels/common/softmax_output.h):
//   softmax      y = exp(x - m) / s
//   log-softmax  y = (x - m) - log(s)     (x - m first: exact near the max)
// with m = max of the row and s = sum of exp(x - m) over it. A block's partial is its chunk's
// online (max, rescaled sum) (Milakov & Gimelshein 2018, "Online normalizer calculation for
// softmax", algorithm 3), the group's partials merge the same way in warp 0.
// x and y are of the element type KF_DTYPE (f32, f16 or bf16; kernels/cuda/common/elem.cuh),
// the statistics fp32. Bytes per call: rows * cols * 2 * sizeof(element) (x read once, y
// written once).
// Parameters: KF_BLOCK_THREADS, KF_VEC (elements per access), KF_UNROLL (accesses in flight
// per thread), KF_LAG (rows the reduction runs ahead of the write), KF_BLOCKS_PER_SM, KF_ASYNC
// (1: loads by cp.async, straight to shared memory), KF_ROW_TICKETS (1: with LAG 0 a group takes
// its next row from a global counter, so rows start in order; 0: group g takes rows g,
// g + groups, ...). The chunks live in shared memory (run_resident) when the row fits the grid's,
// else they are re-read from L2 (run_l2).
#pragma once

#include <cuda/common/online_softmax.cuh>
#include <cuda/common/row_pipeline.cuh>
#include <cuda/common/softmax_rows/rows.cuh>

#include <cfloat>
#include <cstdint>

#ifndef KF_BLOCK_THREADS
#define KF_BLOCK_THREADS 512
#endif
#ifndef KF_VEC
#define KF_VEC 4
#endif
#ifndef KF_UNROLL
#define KF_UNROLL 4
#endif
#ifndef KF_LAG
#define KF_LAG 0
#endif
#ifndef KF_BLOCKS_PER_SM
#define KF_BLOCKS_PER_SM 2
#endif
#ifndef KF_ASYNC
#define KF_ASYNC 1
#endif
#ifndef KF_ROW_TICKETS
#define KF_ROW_TICKETS 1
#endif

static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 64 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [64, 1024]");
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4 || (KF_VEC == 8 && kf::kElemBytes == 2),
              "VEC must be 1, 2 or 4 (also 8 for f16/bf16: 16-byte accesses)");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");
static_assert(KF_LAG >= 0 && KF_LAG <= 3, "LAG in [0, 3]");
static_assert(KF_BLOCKS_PER_SM >= 1 && KF_BLOCKS_PER_SM <= 8, "BLOCKS_PER_SM in [1, 8]");
static_assert(KF_ASYNC == 0 || KF_ASYNC == 1, "ASYNC is 0 or 1");
static_assert(KF_ROW_TICKETS == 0 || KF_ROW_TICKETS == 1, "ROW_TICKETS is 0 or 1");

namespace kf::softmax_rows::split_row {

constexpr int kThreads = KF_BLOCK_THREADS;
constexpr int kWarps = KF_BLOCK_THREADS / 32;

using kf::online_softmax::accumulate;
using kf::online_softmax::merge;
using kf::online_softmax::warp_merge;

/// The pipeline's operation (kernels/cuda/common/row_pipeline.cuh) for V-element accesses.
template <int V, class Output>
struct SplitRowOp {
  struct State {
    float m, s;
  };

  __device__ State start(int64_t) const { return State{-FLT_MAX, 0.0f}; }

  __device__ void add(State& state, const float (&v)[V]) const {
    accumulate<V>(v, state.m, state.s);
  }

  __device__ float4 finish(State& state) const {
    __shared__ float red_m[kWarps];
    __shared__ float red_s[kWarps];
    float m = state.m, s = state.s;
    warp_merge(m, s);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
      red_m[warp] = m;
      red_s[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
      m = lane < kWarps ? red_m[lane] : -FLT_MAX;
      s = lane < kWarps ? red_s[lane] : 0.0f;
      warp_merge(m, s);
    }
    __syncthreads();  // red_m / red_s are rewritten by the next row's reduction
    return make_float4(m, s, 0.0f, 0.0f);
  }

  __device__ float4 combine(const float4* partials, int count) const {
    float m = -FLT_MAX, s = 0.0f;
    for (int i = threadIdx.x; i < count; i += 32) {
      const float4 p = __ldcg(partials + i);
      merge(m, s, p.x, p.y);
    }
    warp_merge(m, s);
    // softmax: (max, 1 / sum); log-softmax: (max, log(sum)), an accurate log once per row.
    return make_float4(m, Output::row_constant(s), 0.0f, 0.0f);
  }

  struct Cols {};

  __device__ void load_cols(Cols&, int64_t) const {}

  __device__ void apply(float (&v)[V], const Cols&, float4 constants) const {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      v[k] = output<Output>(v[k], constants.x, constants.y);
    }
  }
};

/// Output (softmax or log-softmax) of x [rows, cols] into y on `stream`, V elements per access
/// (V divides cols; x and y aligned to V elements). Returns a cudaError_t.
template <int V, class Output>
cudaError_t launch(const kf_elem* x, kf_elem* y, int64_t rows, int64_t cols,
                   cudaStream_t stream) {
  return kf::pipeline::launch_rows<kThreads, V, KF_UNROLL, KF_LAG, KF_BLOCKS_PER_SM, true,
                                   KF_ASYNC != 0, KF_ROW_TICKETS != 0>(SplitRowOp<V, Output>{},
                                                                       x, y, rows, cols, stream);
}

/// The entry point (kforge_run) of a split_row_resident variant; Output is kf::SoftmaxOutput
/// or kf::LogSoftmaxOutput. One input x [rows, cols] and one output y of the same shape, both of
/// the compiled element type. V = KF_VEC when cols % KF_VEC == 0 and both pointers are
/// KF_VEC-element aligned, else the scalar instantiation. Returns 0, -1 (wrong tensor count), -2
/// (wrong rank or shape), -3 (a dtype other than the compiled element type), -4 (non-compact
/// strides) or a cudaError_t (a failed cooperative launch included).
template <class Output>
int run(const kforge_args* args) {
  Rows call;
  if (const int error = read_rows(args, call)) return error;
  if (call.rows == 0 || call.cols == 0) return 0;
  if (vector_path<KF_VEC>(call)) {
    return static_cast<int>(
        launch<KF_VEC, Output>(call.x, call.y, call.rows, call.cols, call.stream));
  }
  return static_cast<int>(launch<1, Output>(call.x, call.y, call.rows, call.cols, call.stream));
}

}  // namespace kf::softmax_rows::split_row
