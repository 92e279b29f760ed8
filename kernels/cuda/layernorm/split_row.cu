// LayerNorm over the last dimension, each row split across many blocks (for few, very long rows:
// KernelBench 40_LayerNorm normalizes 16 rows of 64*256*256 = 4,194,304 floats):
//   y[r, c] = (x[r, c] - mean_r) * rsqrt(var_r + eps) * w[c] + b[c],  var_r biased (1/cols).
// One block per row cannot fill 132 SMs with 16 rows; here two kernels share the work:
//   stats      rows * ceil(cols / CHUNK) blocks; each reduces CHUNK elements of one row to a
//              partial (Welford (n, mean, M2) with WELFORD = 1, else (sum, sum of squares)),
//              writes it to a workspace, and the last block of the row to finish (an atomic
//              counter, the threadfence-reduction pattern of the CUDA samples) merges the row's
//              partials in double and stores (mean, rstd).
//   normalize  one thread per VEC columns of a band of rows; it loads w and b once and walks
//              down the band (UNROLL rows' loads in flight). The rows are cut into bands
//              (blockIdx.y) only when the columns alone give fewer than ~8 blocks per SM: one band
//              at 16 x 4M, 132 bands of 63 rows at 8192 x 4096 (one band there would run 8
//              blocks of 256 threads over all 8192 rows: 0.03x the reference on the H200).
// x is read twice. ROW_GROUP > 0 runs the pair of kernels per group of that many rows so that a
// group's rows (16 MiB each at the KernelBench size) can still sit in L2 for the second read;
// ROW_GROUP = 0 runs all rows at once (w and b then read only once).
// The workspace is static device memory of this module (no allocation per call): at most
// kMaxPartials partials and kMaxGroupRows rows per group; larger inputs run in several groups.
// fp32 loads, fp32 per-thread statistics, double across blocks. Vector loads only when
// cols % VEC == 0 and every pointer is VEC*4-byte aligned; otherwise the scalar instantiation.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#ifndef KF_BLOCK_THREADS
#define KF_BLOCK_THREADS 256
#endif
#ifndef KF_VEC
#define KF_VEC 4
#endif
#ifndef KF_CHUNK
#define KF_CHUNK 16384
#endif
#ifndef KF_UNROLL
#define KF_UNROLL 2
#endif
#ifndef KF_WELFORD
#define KF_WELFORD 1
#endif
#ifndef KF_ROW_GROUP
#define KF_ROW_GROUP 0
#endif

static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 64 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [64, 1024]");
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4, "VEC must be 1, 2 or 4");
static_assert(KF_CHUNK >= 1024 && KF_CHUNK % 4 == 0, "CHUNK >= 1024, a multiple of 4");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");
static_assert(KF_WELFORD == 0 || KF_WELFORD == 1, "WELFORD is 0 or 1");
static_assert(KF_ROW_GROUP >= 0, "ROW_GROUP >= 0 (0: all rows at once)");

namespace {

constexpr int kThreads = KF_BLOCK_THREADS;
constexpr int kWarps = KF_BLOCK_THREADS / 32;
constexpr int64_t kMaxPartials = int64_t{1} << 18;  // 3 MiB of float triples
constexpr int64_t kMaxGroupRows = int64_t{1} << 16;

__device__ float g_partials[kMaxPartials * 3];
__device__ unsigned int g_arrived[kMaxGroupRows];  // zero at load; the last block resets it
__device__ float2 g_row_stats[kMaxGroupRows];       // (mean, rstd) of each row of the group

bool aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <int V>
__device__ __forceinline__ void load_vec(const float* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 t = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
  } else if constexpr (V == 2) {
    const float2 t = __ldg(reinterpret_cast<const float2*>(p));
    v[0] = t.x; v[1] = t.y;
  } else {
    v[0] = __ldg(p);
  }
}

template <int V>
__device__ __forceinline__ void store_vec(float* p, const float (&v)[V]) {
  if constexpr (V == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else if constexpr (V == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  } else {
    p[0] = v[0];
  }
}

/// Running statistics of a set of values. WELFORD: count, mean and sum of squared deviations,
/// merged with Chan et al.'s pairwise formula (1979); else count, sum and sum of squares.
struct Stats {
  float n = 0.0f, a = 0.0f, b = 0.0f;  // (n, mean, M2) or (n, sum, sum of squares)
};

__device__ __forceinline__ void merge(Stats& s, const Stats& o) {
#if KF_WELFORD
  const float n = s.n + o.n;
  if (n == 0.0f) return;
  const float delta = o.a - s.a;
  const float wo = o.n / n;
  s.a += delta * wo;
  s.b += o.b + delta * delta * s.n * wo;
  s.n = n;
#else
  s.n += o.n;
  s.a += o.a;
  s.b += o.b;
#endif
}

/// Folds k values into the thread's statistics (a local mean and M2 first, then one merge).
template <int K>
__device__ __forceinline__ void accumulate(Stats& s, const float (&v)[K]) {
  Stats local;
  local.n = static_cast<float>(K);
#if KF_WELFORD
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) sum += v[k];
  local.a = sum * (1.0f / K);
#pragma unroll
  for (int k = 0; k < K; ++k) local.b += (v[k] - local.a) * (v[k] - local.a);
#else
#pragma unroll
  for (int k = 0; k < K; ++k) {
    local.a += v[k];
    local.b += v[k] * v[k];
  }
#endif
  merge(s, local);
}

__device__ __forceinline__ Stats block_merge(Stats s, Stats* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Stats other;
    other.n = __shfl_xor_sync(0xffffffffu, s.n, o);
    other.a = __shfl_xor_sync(0xffffffffu, s.a, o);
    other.b = __shfl_xor_sync(0xffffffffu, s.b, o);
    merge(s, other);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < kWarps ? red[lane] : Stats{};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      Stats other;
      other.n = __shfl_xor_sync(0xffffffffu, s.n, o);
      other.a = __shfl_xor_sync(0xffffffffu, s.a, o);
      other.b = __shfl_xor_sync(0xffffffffu, s.b, o);
      merge(s, other);
    }
  }
  return s;  // valid in thread 0
}

/// Block (row, split) of the group reduces its chunk; the row's last block finishes the row.
template <int V>
__global__ void __launch_bounds__(kThreads)
layernorm_stats(const float* __restrict__ x, int64_t cols, int64_t splits, float eps) {
  __shared__ Stats red[kWarps];
  __shared__ bool last;
  const int64_t row = blockIdx.x / splits, split = blockIdx.x % splits;
  const int64_t chunk_vecs = KF_CHUNK / V;
  const int64_t nvec = cols / V;
  const int64_t begin = split * chunk_vecs, end = min(nvec, begin + chunk_vecs);
  const float* xr = x + row * cols;
  constexpr int U = KF_UNROLL;

  Stats s;
  int64_t i = begin + threadIdx.x;
  for (; i + (U - 1) * kThreads < end; i += U * kThreads) {
    float v[U * V];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float t[V];
      load_vec<V>(xr + (i + u * kThreads) * V, t);
#pragma unroll
      for (int k = 0; k < V; ++k) v[u * V + k] = t[k];
    }
    accumulate<U * V>(s, v);
  }
  for (; i < end; i += kThreads) {
    float v[V];
    load_vec<V>(xr + i * V, v);
    accumulate<V>(s, v);
  }
  s = block_merge(s, red);
  if (threadIdx.x == 0) {
    float* p = g_partials + (row * splits + split) * 3;
    p[0] = s.n;
    p[1] = s.a;
    p[2] = s.b;
    __threadfence();  // the partial is visible device-wide before the arrival is counted
    last = atomicAdd(&g_arrived[row], 1u) == splits - 1;
  }
  __syncthreads();
  if (!last || threadIdx.x >= 32) return;

  // The row's last block: one warp merges the row's partials in double.
  __threadfence();
  double n = 0.0, a = 0.0, b = 0.0;
  for (int64_t k = threadIdx.x; k < splits; k += 32) {
    const float* p = g_partials + (row * splits + k) * 3;
    const double on = __ldcg(p), oa = __ldcg(p + 1), ob = __ldcg(p + 2);
#if KF_WELFORD
    const double nn = n + on;
    if (nn > 0.0) {
      const double delta = oa - a;
      a += delta * on / nn;
      b += ob + delta * delta * n * on / nn;
      n = nn;
    }
#else
    n += on;
    a += oa;
    b += ob;
#endif
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const double on = __shfl_xor_sync(0xffffffffu, n, o);
    const double oa = __shfl_xor_sync(0xffffffffu, a, o);
    const double ob = __shfl_xor_sync(0xffffffffu, b, o);
#if KF_WELFORD
    const double nn = n + on;
    if (nn > 0.0) {
      const double delta = oa - a;
      a += delta * on / nn;
      b += ob + delta * delta * n * on / nn;
      n = nn;
    }
#else
    n += on;
    a += oa;
    b += ob;
#endif
  }
  if (threadIdx.x == 0) {
#if KF_WELFORD
    const double mean = a, var = b / static_cast<double>(cols);
#else
    const double mean = a / static_cast<double>(cols);
    const double var = fmax(b / static_cast<double>(cols) - mean * mean, 0.0);
#endif
    g_row_stats[row] = make_float2(static_cast<float>(mean),
                                   static_cast<float>(rsqrt(var + static_cast<double>(eps))));
    g_arrived[row] = 0;  // ready for the next group or call (same stream, kernels in order)
  }
}

/// Thread t of grid row blockIdx.y owns columns [t * V, t * V + V) of the rows
/// [blockIdx.y * band, min(rows, (blockIdx.y + 1) * band)) of the group.
template <int V>
__global__ void __launch_bounds__(kThreads)
layernorm_normalize(const float* __restrict__ x, const float* __restrict__ w,
                    const float* __restrict__ b, float* __restrict__ y, int64_t group_rows,
                    int64_t cols, int64_t band) {
  constexpr int U = KF_UNROLL;
  const int64_t nvec = cols / V;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * band;
  if (first >= group_rows) return;
  const int64_t rows = band < group_rows - first ? band : group_rows - first;
  x += first * cols;
  y += first * cols;
  const float2* row_stats = g_row_stats + first;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < nvec;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    float wv[V], bv[V];
    load_vec<V>(w + i * V, wv);
    load_vec<V>(b + i * V, bv);
    int64_t r = 0;
    for (; r + U <= rows; r += U) {
      float v[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) load_vec<V>(x + (r + u) * cols + i * V, v[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const float2 st = row_stats[r + u];
#pragma unroll
        for (int k = 0; k < V; ++k) v[u][k] = (v[u][k] - st.x) * st.y * wv[k] + bv[k];
        store_vec<V>(y + (r + u) * cols + i * V, v[u]);
      }
    }
    for (; r < rows; ++r) {
      float v[V];
      load_vec<V>(x + r * cols + i * V, v);
      const float2 st = row_stats[r];
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = (v[k] - st.x) * st.y * wv[k] + bv[k];
      store_vec<V>(y + r * cols + i * V, v);
    }
  }
}

template <int V>
int launch(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols,
           float eps, cudaStream_t stream) {
  const int64_t splits = (cols + KF_CHUNK - 1) / KF_CHUNK;
  int64_t group = std::min<int64_t>({rows, kMaxPartials / splits, kMaxGroupRows});
  if (KF_ROW_GROUP > 0) group = std::min<int64_t>(group, KF_ROW_GROUP);
  if (group < 1) return -5;  // a row needs more partials than the workspace holds
  // ~8 normalize blocks per SM on a 132-SM part: from the columns first, then from bands of
  // rows when the columns give fewer.
  constexpr int64_t kTargetBlocks = int64_t{132} * 8;
  // Wide rows: a fresh block per kThreads column vectors (blocks start in address order), not
  // a grid-stride loop over a grid capped at kTargetBlocks, whose blocks drift apart. On the H200
  // at 16 x 4,194,304: 0.2176 against 0.2189 ms at VEC 2, 0.232 against 0.248 ms at VEC 4
  // (bench/kernels/README.md, sixth session).
  const int64_t col_blocks = (cols / V + kThreads - 1) / kThreads;
  for (int64_t r0 = 0; r0 < rows; r0 += group) {
    const int64_t n = std::min(group, rows - r0);
    const int64_t bands = std::min<int64_t>(n, std::max<int64_t>(1, kTargetBlocks / col_blocks));
    const int64_t band = (n + bands - 1) / bands;
    layernorm_stats<V><<<static_cast<unsigned>(n * splits), kThreads, 0, stream>>>(
        x + r0 * cols, cols, splits, eps);
    layernorm_normalize<V><<<dim3(static_cast<unsigned>(col_blocks),
                                  static_cast<unsigned>((n + band - 1) / band)),
                             kThreads, 0, stream>>>(x + r0 * cols, w, b, y + r0 * cols, n, cols,
                                                    band);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

// Inputs x [rows, cols], w [cols], b [cols]; output y [rows, cols]; scalar eps.
// Error codes: -1 wrong tensor/scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, -5 a row longer than the workspace allows (2^18 * CHUNK columns),
// otherwise a cudaError_t.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 3 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& b = args->inputs[2];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || w.ndim != 1 || b.ndim != 1 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (w.shape[0] != cols || b.shape[0] != cols || y.shape[0] != rows || y.shape[1] != cols)
    return -2;
  if (!kf::is_f32(x) || !kf::is_f32(w) || !kf::is_f32(b) || !kf::is_f32(y)) return -3;
  if (!kf::is_compact(x) || !kf::is_compact(w) || !kf::is_compact(b) || !kf::is_compact(y))
    return -4;
  if (rows == 0 || cols == 0) return 0;

  const float* xp = kf::data_of<const float>(x);
  const float* wp = kf::data_of<const float>(w);
  const float* bp = kf::data_of<const float>(b);
  float* yp = kf::data_of<float>(y);
  const float eps = static_cast<float>(args->scalars[0]);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  constexpr int bytes = KF_VEC * 4;
  const bool vec = KF_VEC > 1 && cols % KF_VEC == 0 && aligned(xp, bytes) && aligned(wp, bytes) &&
                   aligned(bp, bytes) && aligned(yp, bytes);
  if (vec) return launch<KF_VEC>(xp, wp, bp, yp, rows, cols, eps, stream);
  return launch<1>(xp, wp, bp, yp, rows, cols, eps, stream);
}
