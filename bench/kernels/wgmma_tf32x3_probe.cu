// Can Hopper's wgmma carry 3xTF32 (fp32-accurate GEMM on TF32 tensor cores, kernels/cuda/common/
// tf32x3.cuh) past what mma.sync reaches? Issue 20's LinearReLUDiv target (KernelBench L2/63,
// Y = X W^T at M 1024, K 8192, N 8192, 137.4 GFLOP) asks 2x over eager's 2.72 ms on the H200,
// 1.36 ms = 101 TFLOP/s of fp32 work: 303 TFLOP/s of TF32 tensor-core work in three products,
// 61% of the H200's 494 dense TF32 TFLOP/s. mma.sync (the gemm_epilogue family's tf32x3_mma)
// issues from one warp at a time and reaches well under that on Hopper; wgmma is the path
// that can. This program times both at one shape and checks them against float64.
//
// The wgmma kernel (sm_90a): a block of two warpgroups computes a 128 x BN tile, each warpgroup
// m64 x BN with wgmma.m64nBNk8 (A and B from shared memory through descriptors: K-major,
// 128-byte swizzle; one k-slice BK = 32 floats is exactly one 128-byte swizzle row). A
// STAGES-deep cp.async ring loads raw fp32 tiles into the swizzled layout (16-byte chunk q of
// row r at chunk q ^ (r % 8), the pattern the hardware applies to addresses within a 1024-byte
// atom); all 256 threads then split each landed tile in place into hi = tf32(v) and, in a twin
// buffer of the same layout, lo = tf32(v - hi) (fence.proxy.async makes the generic-proxy writes
// visible to wgmma). Per k-slice a warpgroup issues 4 k-steps x 3 products (lo*hi, hi*lo, then
// hi*hi: the small terms first) into a slice accumulator S (scale-d 0 on the first), and adds S
// to the running fp32 sum D with ordinary adds: tensor cores truncate their accumulation, so D
// never passes through them (tf32x3.cuh says why: 38x the fp32 model's error at K = 4097
// otherwise). While the tensor cores work on slice s, the threads wait for slice s+1, split it
// and put slice s+STAGES-1 in flight; then wgmma.wait_group 0 and the adds. (Two S register sets
// with wait_group 1, adding slice s-1 while slice s runs, made ptxas serialize every wgmma,
// warning C7514: reads of accumulator registers inside a wgmma pipeline stage.)
// Accumulator layout of m64nN f32 (PTX ISA, "Register fragment for wgmma .f32 accumulator"):
// warp w of the warpgroup holds rows 16w .. 16w + 15; with g = lane / 4, t = lane % 4,
// d[4j + 0] = (g, 8j + 2t), d[4j + 1] = (g, 8j + 2t + 1), d[4j + 2] = (g + 8, 8j + 2t),
// d[4j + 3] = (g + 8, 8j + 2t + 1).
// Sources: PTX ISA 9.0 "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" (wgmma, the
// matrix descriptor, swizzling modes); NVIDIA CUTLASS (the SM90 GMMA mainloops, 3xTF32
// OpMultiplyAddFastF32); Ootomo & Yokota, IJHPCA 2022 (the split).
//
// The kernel became the gemm_epilogue family's tf32x3_wgmma variant (with bias and epilogue); this
// program keeps the experiment, sharing its wgmma helpers (kernels/cuda/common/wgmma.cuh).
// Build here (nvcc 13; the -gencode form: see ../.library HOPPER.md):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Ikernels \
//     -I<dlpack include> bench/kernels/wgmma_tf32x3_probe.cu -o wgmma_tf32x3_probe
//   ./wgmma_tf32x3_probe [M N K [ITERS]]    (default 1024 8192 8192 20)
// Prints per kernel: median and min ms over ITERS calls, TFLOP/s of the fp32 work (2 M N K over
// the median), and on 4096 sampled outputs the largest error against float64 next to the
// largest error of an fp32 loop (sequential sums) on the same outputs, on U[0, 1) inputs
// (KernelBench's) and on normal inputs (sums that cancel).
#include <cuda/gemm_epilogue/tf32x3_mma.cu>  // the family's mma.sync kernel: kforge_run
#include <cuda/common/wgmma.cuh>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace probe {

using kf::tf32x3::cp_async_16;
using kf::tf32x3::to_tf32;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "wgmma_tf32x3_probe: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(2);
  }
}

constexpr int kBM = 128, kBK = 32, kThreads = 256;

using kf::wgmma::descriptor;
using kf::wgmma::fence_operands;
using kf::wgmma::fence_proxy_async;

/// Issues the 16-byte copies of rows [row0, row0 + ROWS) x k-slice [k0, k0 + 32) of a K-major
/// matrix (rows x K, K % 4 == 0) into `tile` in the 128-byte-swizzled layout, zero-filling what
/// lies outside.
template <int ROWS>
__device__ __forceinline__ void load_swizzled(float* tile, const float* src, int64_t rows,
                                              int64_t K, int64_t row0, int64_t k0, int tid) {
  constexpr int kChunks = ROWS * 8;  // 8 chunks of 16 bytes a row
  static_assert(kChunks % kThreads == 0, "whole copies per thread");
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const int idx = tid + i * kThreads, r = idx >> 3, q = idx & 7;
    const int64_t k = k0 + q * 4;
    const bool inside = row0 + r < rows && k < K;
    const float* p = inside ? src + (row0 + r) * K + k : src;
    cp_async_16(tile + r * kBK + ((q ^ (r & 7)) << 2), p, inside ? 16 : 0);
  }
}

template <int BN, int STAGES>
struct Layout {
  static constexpr int kTileA = kBM * kBK, kTileB = BN * kBK;  // floats
  // A hi (raw), A lo, B hi (raw), B lo: every part a multiple of 1024 bytes.
  static constexpr int kStage = 2 * (kTileA + kTileB);
  static constexpr size_t kSmemBytes = sizeof(float) * STAGES * kStage + 1024;  // + alignment
};

template <int BN, int STAGES>
__global__ void __launch_bounds__(kThreads, 1)
gemm_wgmma_3xtf32(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                  int64_t M, int64_t N, int64_t K) {
  using L = Layout<BN, STAGES>;
  static_assert(STAGES >= 3, "the ring holds the slice in the tensor cores, the one being split "
                             "and the one loading");
  extern __shared__ unsigned char smem_raw[];
  float* smem = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM, n0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int ktiles = static_cast<int>((K + kBK - 1) / kBK);

  auto stage = [&](int s) { return smem + s * L::kStage; };
  auto load = [&](int s, int kt) {
    float* p = stage(s);
    load_swizzled<kBM>(p, x, M, K, m0, static_cast<int64_t>(kt) * kBK, tid);
    load_swizzled<BN>(p + 2 * L::kTileA, w, N, K, n0, static_cast<int64_t>(kt) * kBK, tid);
  };
  // raw -> hi in place, lo into the twin buffer (same layout: the swizzle is within a row).
  auto split = [&](float* p) {
    constexpr int kVecA = L::kTileA / 4, kVecAll = (L::kTileA + L::kTileB) / 4;
    static_assert(kVecAll % kThreads == 0, "whole float4s per thread");
#pragma unroll
    for (int i = 0; i < kVecAll / kThreads; ++i) {
      const int v = tid + i * kThreads;
      float* raw = v < kVecA ? p + 4 * v : p + 2 * L::kTileA + 4 * (v - kVecA);
      float* lo = raw + (v < kVecA ? L::kTileA : L::kTileB);
      float4 value = *reinterpret_cast<float4*>(raw), h, l;
      h.x = __uint_as_float(to_tf32(value.x)); l.x = __uint_as_float(to_tf32(value.x - h.x));
      h.y = __uint_as_float(to_tf32(value.y)); l.y = __uint_as_float(to_tf32(value.y - h.y));
      h.z = __uint_as_float(to_tf32(value.z)); l.z = __uint_as_float(to_tf32(value.z - h.z));
      h.w = __uint_as_float(to_tf32(value.w)); l.w = __uint_as_float(to_tf32(value.w - h.w));
      *reinterpret_cast<float4*>(raw) = h;
      *reinterpret_cast<float4*>(lo) = l;
    }
  };

  float acc[BN / 2], part[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = part[i] = 0.0f;

  // Slices 0 .. STAGES-2 in flight; slice 0 split before the loop.
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < ktiles) load(st, st);
    kf::tf32x3::cp_async_commit();
  }
  kf::tf32x3::cp_async_wait<STAGES - 2>();
  __syncthreads();
  split(stage(0));
  fence_proxy_async();
  __syncthreads();

#pragma unroll 1
  for (int kt = 0; kt < ktiles; ++kt) {
    // 1. The 12 products of slice kt into `part` (the small terms first; scale-d 0 on the first).
    const float* p = stage(kt % STAGES);
    const float* a_hi = p + wg * 64 * kBK;
    const float* a_lo = a_hi + L::kTileA;
    const float* b_hi = p + 2 * L::kTileA;
    const float* b_lo = b_hi + L::kTileB;
    fence_operands(part);
    kf::wgmma::fence();
#pragma unroll
    for (int k = 0; k < kBK / 8; ++k) {
      kf::wgmma::tile<BN>(part, descriptor(a_lo + 8 * k), descriptor(b_hi + 8 * k), k > 0 ? 1 : 0);
      kf::wgmma::tile<BN>(part, descriptor(a_hi + 8 * k), descriptor(b_lo + 8 * k), 1);
      kf::wgmma::tile<BN>(part, descriptor(a_hi + 8 * k), descriptor(b_hi + 8 * k), 1);
    }
    kf::wgmma::commit();
    // 2-5. While the tensor cores work: slice kt+1 lands and is split, slice kt+STAGES-1 goes in
    // flight into the buffer of slice kt-1 (every warpgroup finished it: step 6 came before the
    // barrier). No accumulator register is touched until the wait (ptxas would serialize the
    // wgmmas otherwise, C7514).
    kf::tf32x3::cp_async_wait<STAGES - 3>();
    __syncthreads();
    const int next = kt + STAGES - 1;
    if (next < ktiles) load(next % STAGES, next);
    kf::tf32x3::cp_async_commit();
    if (kt + 1 < ktiles) {
      split(stage((kt + 1) % STAGES));
      fence_proxy_async();
    }
    // 6. Slice kt out of the tensor cores: add it to the running fp32 sum.
    kf::wgmma::wait_all();
    fence_operands(part);
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] += part[i];
    // 7. Slice kt+1's split is visible to every warpgroup before its products are issued.
    __syncthreads();
  }
  kf::tf32x3::cp_async_wait<0>();

  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t row = m0 + wg * 64 + warp * 16 + g + 8 * half;
      const int64_t col = n0 + 8 * j + 2 * t;
      if (row >= M) continue;
      if (col < N) y[row * N + col] = acc[4 * j + 2 * half];
      if (col + 1 < N) y[row * N + col + 1] = acc[4 * j + 2 * half + 1];
    }
}

template <int BN, int STAGES>
cudaError_t launch_wgmma(const float* x, const float* w, float* y, int64_t M, int64_t N, int64_t K) {
  using L = Layout<BN, STAGES>;
  auto kernel = gemm_wgmma_3xtf32<BN, STAGES>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(L::kSmemBytes));
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((N + BN - 1) / BN), static_cast<unsigned>((M + kBM - 1) / kBM));
  kernel<<<grid, kThreads, L::kSmemBytes>>>(x, w, y, M, N, K);
  return cudaGetLastError();
}

/// The family's mma.sync kernel through its kforge ABI entry point.
cudaError_t launch_mma_sync(const float* x, const float* w, float* y, int64_t M, int64_t N, int64_t K) {
  int64_t xs[2] = {M, K}, ws[2] = {N, K}, ys[2] = {M, N};
  DLTensor in[2] = {}, out[1] = {};
  auto fill = [](DLTensor& t, const float* p, int64_t* shape) {
    t.data = const_cast<float*>(p);
    t.device = {kDLCUDA, 0};
    t.ndim = 2;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    t.strides = nullptr;
    t.byte_offset = 0;
  };
  fill(in[0], x, xs);
  fill(in[1], w, ws);
  fill(out[0], y, ys);
  kforge_args args{KFORGE_ABI_VERSION, 2, in, 1, out, 0, nullptr, nullptr};
  const int rc = kforge_run(&args);
  return rc == 0 ? cudaSuccess : static_cast<cudaError_t>(rc > 0 ? rc : 1);
}

struct Kernel {
  const char* name;
  cudaError_t (*launch)(const float*, const float*, float*, int64_t, int64_t, int64_t);
};

}  // namespace probe

int main(int argc, char** argv) {
  using namespace probe;
  const int64_t M = argc > 3 ? std::atoll(argv[1]) : 1024, N = argc > 3 ? std::atoll(argv[2]) : 8192,
                K = argc > 3 ? std::atoll(argv[3]) : 8192;
  const int iters = argc > 4 ? std::atoi(argv[4]) : 20;
  if (K % 4 != 0) {
    std::fprintf(stderr, "wgmma_tf32x3_probe: K must be a multiple of 4 (16-byte rows), got %lld\n",
                 static_cast<long long>(K));
    return 2;
  }
  const Kernel kernels[] = {
      {"mma_sync tf32x3 (family default)", launch_mma_sync},
      {"wgmma tf32x3 BN64 STAGES3", launch_wgmma<64, 3>},
      {"wgmma tf32x3 BN64 STAGES4", launch_wgmma<64, 4>},
      {"wgmma tf32x3 BN128 STAGES3", launch_wgmma<128, 3>},
  };
  std::printf("M %lld N %lld K %lld, %d timed calls each\n", static_cast<long long>(M),
              static_cast<long long>(N), static_cast<long long>(K), iters);
  std::vector<float> hx(M * K), hw(N * K), hy(M * N);
  float *x, *w, *y;
  check(cudaMalloc(&x, hx.size() * 4), "cudaMalloc x");
  check(cudaMalloc(&w, hw.size() * 4), "cudaMalloc w");
  check(cudaMalloc(&y, hy.size() * 4), "cudaMalloc y");
  std::mt19937_64 rng(2026);
  std::vector<std::pair<int64_t, int64_t>> samples;
  for (int i = 0; i < 4096; ++i)
    samples.emplace_back(static_cast<int64_t>(rng() % M), static_cast<int64_t>(rng() % N));
  const double flops = 2.0 * M * N * K;
  for (const char* inputs : {"uniform", "normal"}) {
    std::uniform_real_distribution<float> uni(0.0f, 1.0f);
    std::normal_distribution<float> nor(0.0f, 1.0f);
    for (float& v : hx) v = inputs[0] == 'u' ? uni(rng) : nor(rng);
    for (float& v : hw) v = inputs[0] == 'u' ? uni(rng) : nor(rng);
    check(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice), "copy x");
    check(cudaMemcpy(w, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice), "copy w");
    // float64 reference and the fp32 model (a sequential fp32 sum) on the sampled outputs.
    std::vector<double> ref(samples.size()), fp32_err(samples.size());
    double fp32_max = 0.0, scale = 0.0;
    for (size_t s = 0; s < samples.size(); ++s) {
      const auto [i, j] = samples[s];
      double exact = 0.0, mag = 0.0;
      float f = 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        exact += static_cast<double>(hx[i * K + k]) * hw[j * K + k];
        mag += std::fabs(static_cast<double>(hx[i * K + k]) * hw[j * K + k]);
        f = std::fmaf(hx[i * K + k], hw[j * K + k], f);
      }
      ref[s] = exact;
      fp32_max = std::max(fp32_max, std::fabs(f - exact));
      scale = std::max(scale, mag);
    }
    std::printf("\n%s inputs: fp32 loop's largest error %.3e (largest sum of |products| %.3e)\n",
                inputs, fp32_max, scale);
    for (const Kernel& kernel : kernels) {
      check(cudaMemset(y, 0xff, hy.size() * 4), "poison y");  // NaN: every element must be written
      cudaError_t err = kernel.launch(x, w, y, M, N, K);
      if (err == cudaSuccess) err = cudaDeviceSynchronize();
      if (err != cudaSuccess) {
        std::printf("  %-34s launch failed: %s\n", kernel.name, cudaGetErrorString(err));
        if (err != cudaErrorInvalidValue && err != cudaErrorLaunchOutOfResources) return 1;
        continue;
      }
      check(cudaMemcpy(hy.data(), y, hy.size() * 4, cudaMemcpyDeviceToHost), "copy y");
      int64_t nan = 0;
      for (float v : hy) nan += std::isnan(v) ? 1 : 0;
      double max_err = 0.0;
      for (size_t s = 0; s < samples.size(); ++s) {
        const auto [i, j] = samples[s];
        max_err = std::max(max_err, std::fabs(static_cast<double>(hy[i * N + j]) - ref[s]));
      }
      std::vector<float> ms;
      cudaEvent_t start, stop;
      check(cudaEventCreate(&start), "event");
      check(cudaEventCreate(&stop), "event");
      for (int it = 0; it < iters + 2; ++it) {
        check(cudaEventRecord(start), "record");
        check(kernel.launch(x, w, y, M, N, K), "launch");
        check(cudaEventRecord(stop), "record");
        check(cudaEventSynchronize(stop), "sync");
        float t = 0.0f;
        check(cudaEventElapsedTime(&t, start, stop), "elapsed");
        if (it >= 2) ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      const double median = ms[ms.size() / 2];
      std::printf("  %-34s median %.4f ms  min %.4f ms  %6.1f TFLOP/s  max err %.3e (%.2fx fp32's)  "
                  "unwritten %lld\n",
                  kernel.name, median, ms.front(), flops / (median * 1e-3) / 1e12, max_err,
                  fp32_max > 0 ? max_err / fp32_max : 0.0, static_cast<long long>(nan));
    }
  }
  return 0;
}
