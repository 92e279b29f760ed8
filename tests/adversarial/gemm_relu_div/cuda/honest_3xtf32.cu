// HONEST (must pass: ok). y = relu(x w^T + b) / divisor on TF32 tensor cores at fp32 accuracy:
// 3xTF32 (a = hi + lo, hi = tf32(a), lo = tf32(a - hi); a*b ~ lo*hi + hi*lo + hi*hi with fp32
// accumulators; NVIDIA CUTLASS, Ootomo & Yokota 2022). Deliberately simple: one warp per 16 x 8
// output tile, fragments read straight from global memory (guarded, zero past the edges), one
// mma.sync.m16n8k8.tf32 per term and k-step. Protects that the precision rule accepts
// split-precision tensor-core schemes, not only SIMT fp32.
// Fragment layout (PTX ISA, "Matrix Fragments for mma.m16n8k8", g = lane / 4, t = lane % 4):
// A a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4); B b0 (k t, n g), b1 (k t + 4, n g);
// C c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1).
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cstdint>

namespace {

const void* data(const DLTensor& t) { return static_cast<const char*>(t.data) + t.byte_offset; }

constexpr int kWarps = 4;  // a block covers 16 rows x (8 * kWarps) columns

__device__ __forceinline__ uint32_t tf32(float v) {
  uint32_t out;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(out) : "f"(v));
  return out;
}

__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ float at(const float* p, int64_t row, int64_t rows, int64_t col,
                                    int64_t cols) {
  return row < rows && col < cols ? p[row * cols + col] : 0.0f;
}

__global__ void gemm_3xtf32(const float* x, const float* w, const float* b, float* y,
                            int64_t m_size, int64_t n_size, int64_t k_size, float divisor) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * 16;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * 8;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t k0 = 0; k0 < k_size; k0 += 8) {
    const float av[4] = {at(x, m0 + g, m_size, k0 + t, k_size),
                         at(x, m0 + g + 8, m_size, k0 + t, k_size),
                         at(x, m0 + g, m_size, k0 + t + 4, k_size),
                         at(x, m0 + g + 8, m_size, k0 + t + 4, k_size)};
    // B (k, n) = w[n][k].
    const float bv[2] = {at(w, n0 + g, n_size, k0 + t, k_size),
                         at(w, n0 + g, n_size, k0 + t + 4, k_size)};
    uint32_t a_hi[4], a_lo[4], b_hi[2], b_lo[2];
    for (int i = 0; i < 4; ++i) {
      a_hi[i] = tf32(av[i]);
      a_lo[i] = tf32(av[i] - __uint_as_float(a_hi[i]));
    }
    for (int i = 0; i < 2; ++i) {
      b_hi[i] = tf32(bv[i]);
      b_lo[i] = tf32(bv[i] - __uint_as_float(b_hi[i]));
    }
    // Into a zeroed tile, then added with fp32 adds: tensor cores truncate their accumulation,
    // so the running sum stays outside them (kernels/cuda/common/tf32x3.cuh says more).
    float step[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma(step, a_lo, b_hi);
    mma(step, a_hi, b_lo);
    mma(step, a_hi, b_hi);
    for (int i = 0; i < 4; ++i) acc[i] += step[i];
  }
  for (int i = 0; i < 4; ++i) {
    const int64_t m = m0 + g + (i >= 2 ? 8 : 0), n = n0 + 2 * t + (i & 1);
    if (m < m_size && n < n_size) {
      const float v = acc[i] + b[n];
      y[m * n_size + n] = (v < 0.0f ? 0.0f : v) / divisor;
    }
  }
}

bool is_f32(const DLTensor& t) {
  return t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 3 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& b = args->inputs[2];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || w.ndim != 2 || b.ndim != 1 || y.ndim != 2) return -2;
  const int64_t m_size = x.shape[0], k_size = x.shape[1], n_size = w.shape[0];
  if (w.shape[1] != k_size || b.shape[0] != n_size || y.shape[0] != m_size ||
      y.shape[1] != n_size) {
    return -2;
  }
  if (!is_f32(x) || !is_f32(w) || !is_f32(b) || !is_f32(y)) return -3;
  if (m_size == 0 || n_size == 0) return 0;
  const dim3 grid(static_cast<unsigned>((n_size + 8 * kWarps - 1) / (8 * kWarps)),
                  static_cast<unsigned>((m_size + 15) / 16));
  gemm_3xtf32<<<grid, 32 * kWarps, 0, static_cast<cudaStream_t>(args->stream)>>>(
      static_cast<const float*>(data(x)), static_cast<const float*>(data(w)),
      static_cast<const float*>(data(b)), const_cast<float*>(static_cast<const float*>(data(y))), m_size, n_size, k_size,
      static_cast<float>(args->scalars[0]));
  return static_cast<int>(cudaGetLastError());
}
