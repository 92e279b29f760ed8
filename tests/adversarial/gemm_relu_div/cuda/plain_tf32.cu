// CHEAT (must be rejected: wrong_answer by the fp32 precision rule). y = relu(x w^T + b) / divisor
// with a correct-looking 16 x 16 shared-memory tiled GEMM whose inputs are rounded to TF32
// (cvt.rna.tf32.f32, 10 mantissa bits) before the fp32 FMAs: the arithmetic plain TF32 tensor
// cores do. Each product errs by ~2^-11 relative, ~100x an fp32 computation's error, yet on
// KernelBench's U[0, 1) inputs the result stays within its 1e-4 / atol 1e-3 style tolerances
// (errors of ~2^-11 per product mostly cancel in the sum). kforge must reject it through the
// task's precision = "fp32" (error against the float64 reference vs the fp32 model's), not the
// tolerance.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cstdint>

namespace {

const void* data(const DLTensor& t) { return static_cast<const char*>(t.data) + t.byte_offset; }

constexpr int kTile = 16;

__device__ __forceinline__ float tf32(float v) {
  uint32_t out;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(out) : "f"(v));
  return __uint_as_float(out);
}

__global__ void gemm_tf32(const float* x, const float* w, const float* b, float* y, int64_t m_size,
                          int64_t n_size, int64_t k_size, float divisor) {
  __shared__ float xs[kTile][kTile + 1];
  __shared__ float ws[kTile][kTile + 1];
  const int64_t m = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const int64_t w_row = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.y;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < k_size; k0 += kTile) {
    const int64_t k = k0 + threadIdx.x;
    xs[threadIdx.y][threadIdx.x] = m < m_size && k < k_size ? tf32(x[m * k_size + k]) : 0.0f;
    ws[threadIdx.y][threadIdx.x] = w_row < n_size && k < k_size ? tf32(w[w_row * k_size + k]) : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < kTile; ++kk) acc = fmaf(xs[threadIdx.y][kk], ws[threadIdx.x][kk], acc);
    __syncthreads();
  }
  if (m < m_size && n < n_size) {
    const float v = acc + b[n];
    y[m * n_size + n] = (v < 0.0f ? 0.0f : v) / divisor;
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 3 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const int64_t m_size = x.shape[0], k_size = x.shape[1], n_size = w.shape[0];
  if (m_size == 0 || n_size == 0) return 0;
  const dim3 grid(static_cast<unsigned>((n_size + kTile - 1) / kTile),
                  static_cast<unsigned>((m_size + kTile - 1) / kTile));
  gemm_tf32<<<grid, dim3(kTile, kTile), 0, static_cast<cudaStream_t>(args->stream)>>>(
      static_cast<const float*>(data(x)), static_cast<const float*>(data(w)),
      static_cast<const float*>(data(args->inputs[2])), const_cast<float*>(static_cast<const float*>(data(args->outputs[0]))),
      m_size, n_size, k_size, static_cast<float>(args->scalars[0]));
  return static_cast<int>(cudaGetLastError());
}
