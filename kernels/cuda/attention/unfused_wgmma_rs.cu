// O = softmax(Q K^T / sqrt(d)) V over a materialized score matrix, both products on Hopper's
// warpgroup tensor cores at fp32 accuracy (3xTF32, the RS wgmma GEMM of
// cuda/common/gemm_wgmma_rs.cuh, gemm_epilogue's tf32x3_wgmma_rs): q, k, v, o [b, s, d], fp32.
// Needs sm_90a (family.toml cuda_arch).
//   1. S = (Q K^T) / sqrt(d) per batch: an "NT" GEMM (both operands d-contiguous), M = N = s,
//      K = d, into a workspace [b, s, ld] (ld = s rounded up to 4 floats: 16-byte rows for TMA);
//   2. each row of S replaced by its softmax, in place (cuda/common/attention_softmax.cuh);
//   3. V transposed into a workspace Vt [b, d, ld] (32 x 32 tiles through shared memory), so
//      that O = P V is an NT GEMM as well: X = P [s, s], W = Vt [d, s], M = s, N = d, K = s.
//      (wgmma reads a tf32 B operand from shared memory K-major only.)
// The workspaces, b*s*ld + b*d*ld floats (3 GiB at KernelBench L1/97's b = 1024, s = 512,
// d = 1024), come from cudaMallocAsync on args->stream (kept mapped between calls: common/workspace.cuh).
//
// KernelBench L1/97 (b 32 x 32 heads, s 512, d 1024): 2 * 2 b s^2 d = 1.10 TFLOP of products;
// eager (fp32 math SDPA) 24.4 ms on the H200 = 45 TFLOP/s. At the ~105 TFLOP/s of fp32 work the
// RS GEMM reaches on L2/63's GEMM, the products take ~10.5 ms; the passes over S (1 GiB written,
// read and written by the softmax, read) and the transpose (2 GiB read, 2 GiB written) add
// ~8 GiB of traffic, ~2 ms at 4 TB/s.
// Sources: as gemm_wgmma_rs.cuh; Vaswani et al. 2017 (the operator).
#include <common/attention_args.h>
#include <cuda/common/attention_softmax.cuh>
#include <cuda/common/gemm_wgmma_rs.cuh>
#include <cuda/common/workspace.cuh>
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#ifndef KF_BN
#define KF_BN 128
#endif
#ifndef KF_STAGES
#define KF_STAGES 4
#endif
#ifndef KF_FLUSH
#define KF_FLUSH 1
#endif

namespace {

constexpr int64_t kMaxGridZ = 65535;

/// s[b][row][col] = v * alpha (row stride ld, batch stride rows * ld).
struct ScaledStore {
  float* s;
  int64_t ld, batch_stride;
  float alpha;
  __device__ __forceinline__ auto row(int64_t b, int64_t row) const {
    return [this, s_row = s + b * batch_stride + row * ld](int64_t col, float v) {
      s_row[col] = v * alpha;
    };
  }
};

/// o[b][row][col] = v (row stride d, batch stride s * d).
struct PlainStore {
  float* o;
  int64_t ld, batch_stride;
  __device__ __forceinline__ auto row(int64_t b, int64_t row) const {
    return [o_row = o + b * batch_stride + row * ld](int64_t col, float v) { o_row[col] = v; };
  }
};

constexpr int kTile = 32;

/// vt[b][j][i] = v[b][i][j] for v [b, s, d] and vt [b, d, ld]: a 32 x 32 tile a block of 32 x 8
/// threads through a padded shared tile (coalesced reads and writes, no bank conflicts).
__global__ void __launch_bounds__(kTile * 8)
transpose(const float* __restrict__ v, float* __restrict__ vt, int64_t s, int64_t d, int64_t ld,
          int64_t batch0) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t b = batch0 + blockIdx.z;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kTile;  // s
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kTile;  // d
  const float* vb = v + b * s * d;
  float* vtb = vt + b * d * ld;
  for (int r = threadIdx.y; r < kTile; r += 8) {
    const int64_t i = i0 + r, j = j0 + threadIdx.x;
    if (i < s && j < d) tile[r][threadIdx.x] = vb[i * d + j];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kTile; r += 8) {
    const int64_t j = j0 + r, i = i0 + threadIdx.x;
    if (j < d && i < s) vtb[j * ld + i] = tile[threadIdx.x][r];
  }
}

cudaError_t attend(const kf::AttentionArgs& a, float* p, float* vt, int64_t ld,
                   cudaStream_t stream) {
  using kf::wgmma_rs::Problem;
  Problem scores;
  scores.x = a.q;
  scores.w = a.k;
  scores.m = scores.n = a.s;
  scores.k = a.d;
  scores.ldx = scores.ldw = a.d;
  scores.batch_x = scores.batch_w = a.s * a.d;
  const ScaledStore to_p{p, ld, a.s * ld, 1.0f / std::sqrt(static_cast<float>(a.d))};
  cudaError_t err =
      kf::wgmma_rs::launch<KF_BN, KF_STAGES, KF_FLUSH>(scores, a.b, to_p, stream);
  if (err != cudaSuccess) return err;
  err = kf::attention::softmax_rows_in_place(p, a.b * a.s, a.s, ld, stream);
  if (err != cudaSuccess) return err;
  for (int64_t batch0 = 0; batch0 < a.b; batch0 += kMaxGridZ) {
    const int64_t chunk = a.b - batch0 < kMaxGridZ ? a.b - batch0 : kMaxGridZ;
    const dim3 grid(static_cast<unsigned>((a.d + kTile - 1) / kTile),
                    static_cast<unsigned>((a.s + kTile - 1) / kTile), static_cast<unsigned>(chunk));
    transpose<<<grid, dim3(kTile, 8), 0, stream>>>(a.v, vt, a.s, a.d, ld, batch0);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  Problem weighted;
  weighted.x = p;
  weighted.w = vt;
  weighted.m = a.s;
  weighted.n = a.d;
  weighted.k = a.s;
  weighted.ldx = weighted.ldw = ld;
  weighted.batch_x = a.s * ld;
  weighted.batch_w = a.d * ld;
  const PlainStore to_o{a.o, a.d, a.s * a.d};
  return kf::wgmma_rs::launch<KF_BN, KF_STAGES, KF_FLUSH>(weighted, a.b, to_o, stream);
}

}  // namespace

// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of a launch or of the workspace.
KFORGE_API int kforge_run(const kforge_args* args) {
  kf::AttentionArgs a;
  if (const int rc = kf::attention_args(args, a); rc != 0) return rc;
  if (a.b == 0 || a.s == 0 || a.d == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  const int64_t ld = (a.s + 3) / 4 * 4;  // 16-byte aligned rows of S and Vt
  void* workspace = nullptr;
  cudaError_t err = kf::workspace::allocate(&workspace, sizeof(float) * a.b * (a.s + a.d) * ld, stream);
  if (err != cudaSuccess) return static_cast<int>(err);
  float* p = static_cast<float*>(workspace);
  err = attend(a, p, p + a.b * a.s * ld, ld, stream);
  const cudaError_t freed = cudaFreeAsync(workspace, stream);
  return static_cast<int>(err != cudaSuccess ? err : freed);
}
