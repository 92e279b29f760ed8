// Can Hopper's wgmma carry 3xTF32 (fp32-accurate GEMM on TF32 tensor cores, kernels/cuda/common/
// tf32x3.cuh) past what mma.sync reaches? Issue 20's LinearReLUDiv target (KernelBench L2/63,
// Y = X W^T at M 1024, K 8192, N 8192, 137.4 GFLOP) asks 2x over eager's 2.72 ms on the H200,
// 1.36 ms = 101 TFLOP/s of fp32 work: 303 TFLOP/s of TF32 tensor-core work in three products,
// 61% of the H200's 494 dense TF32 TFLOP/s. This program times the gemm_epilogue family's
// tensor-core kernels at one shape and checks them against float64.
//
// It times the family's own sources (their design is in their headers: kernels/cuda/
// gemm_epilogue/tf32x3_mma.cu, tf32x3_wgmma.cu and tf32x3_wgmma_rs.cu at four of its points)
// through their kforge_run entry points, each included in a namespace of its own. The numbers
// in compute_bound_h100_s9.md came from this file's first form at 8a01824, which held its own
// copy of the wgmma kernel; those of compute_bound_s19.md from this form.
// Build here (nvcc 13; the -gencode form: see ../.library HOPPER.md):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Ikernels \
//     -I<dlpack include> bench/kernels/wgmma_tf32x3_probe.cu -o wgmma_tf32x3_probe
//   ./wgmma_tf32x3_probe [M N K [ITERS]]    (default 1024 8192 8192 20)
// Prints per kernel: median and min ms over ITERS calls, TFLOP/s of the fp32 work (2 M N K over
// the median), and on 4096 sampled outputs the largest error against float64 next to the
// largest error of an fp32 loop (sequential sums) on the same outputs, on U[0, 1) inputs
// (KernelBench's) and on normal inputs (sums that cancel).
#include <common/epilogue.h>
#include <common/gemm_args.h>
#include <cuda/common/elem.cuh>
#include <cuda/common/tf32x3.cuh>
#include <cuda/common/gemm_wgmma_rs.cuh>  // before the namespaces below: once, at file scope
#include <cuda/common/tma.cuh>
#include <cuda/common/wgmma.cuh>
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include "probe_timing.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

// Each family source defines kforge_run and its constants in an anonymous namespace: one named
// namespace and one entry-point name per included point.
#define kforge_run kforge_run_mma_sync
namespace mma_sync {
#include <cuda/gemm_epilogue/tf32x3_mma.cu>  // default point: BM 128, BN 64, BK 32, 3 stages
}  // namespace mma_sync
#undef kforge_run
#undef KF_BM
#undef KF_BN
#undef KF_BK
#undef KF_STAGES
#define kforge_run kforge_run_wgmma_bn128
namespace wgmma_bn128 {
#include <cuda/gemm_epilogue/tf32x3_wgmma.cu>  // default point: BN 128
}  // namespace wgmma_bn128
#undef kforge_run
#undef KF_BN
#define KF_BN 64
#define kforge_run kforge_run_wgmma_bn64
namespace wgmma_bn64 {
#include <cuda/gemm_epilogue/tf32x3_wgmma.cu>
}  // namespace wgmma_bn64
#undef kforge_run
#undef KF_BN
#undef KF_STAGES
// tf32x3_wgmma_rs at (STAGES, FLUSH); BN 128, W hi raw throughout.
#define KF_STAGES 4
#define KF_FLUSH 1
#define kforge_run kforge_run_rs_s4f1
namespace rs_s4f1 {
#include <cuda/gemm_epilogue/tf32x3_wgmma_rs.cu>
}  // namespace rs_s4f1
#undef kforge_run
#undef KF_FLUSH
#define KF_FLUSH 4
#define kforge_run kforge_run_rs_s4f4
namespace rs_s4f4 {
#include <cuda/gemm_epilogue/tf32x3_wgmma_rs.cu>
}  // namespace rs_s4f4
#undef kforge_run
#undef KF_STAGES
#define KF_STAGES 3
#define kforge_run kforge_run_rs_s3f4
namespace rs_s3f4 {
#include <cuda/gemm_epilogue/tf32x3_wgmma_rs.cu>
}  // namespace rs_s3f4
#undef kforge_run
#undef KF_FLUSH
#define KF_FLUSH 8
#define kforge_run kforge_run_rs_s3f8
namespace rs_s3f8 {
#include <cuda/gemm_epilogue/tf32x3_wgmma_rs.cu>
}  // namespace rs_s3f8
#undef kforge_run

namespace probe {

void check(cudaError_t err, const char* what) { check(err, "wgmma_tf32x3_probe", what); }

/// Y = X W^T through a family point's entry point (no bias, the identity epilogue).
cudaError_t run_point(int (*entry)(const kforge_args*), const float* x, const float* w, float* y,
                      int64_t M, int64_t N, int64_t K) {
  int64_t xs[2] = {M, K}, ws[2] = {N, K}, ys[2] = {M, N};
  DLTensor in[2] = {}, out[1] = {};
  auto fill = [](DLTensor& t, const float* p, int64_t* shape) {
    t.data = const_cast<float*>(p);
    t.device = {kDLCUDA, 0};
    t.ndim = 2;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
  };
  fill(in[0], x, xs);
  fill(in[1], w, ws);
  fill(out[0], y, ys);
  const kforge_args args{KFORGE_ABI_VERSION, 2, in, 1, out, 0, nullptr, nullptr};
  const int rc = entry(&args);
  return rc == 0 ? cudaSuccess : static_cast<cudaError_t>(rc > 0 ? rc : 1);
}

struct Kernel {
  const char* name;
  int (*entry)(const kforge_args*);
  cudaError_t launch(const float* x, const float* w, float* y, int64_t M, int64_t N,
                     int64_t K) const {
    return run_point(entry, x, w, y, M, N, K);
  }
};

}  // namespace probe

int main(int argc, char** argv) {
  using namespace probe;
  const int64_t M = argc > 3 ? std::atoll(argv[1]) : 1024, N = argc > 3 ? std::atoll(argv[2]) : 8192,
                K = argc > 3 ? std::atoll(argv[3]) : 8192;
  const int iters = argc > 4 ? std::atoi(argv[4]) : 20;
  const Kernel kernels[] = {
      {"mma_sync tf32x3_mma (default)", mma_sync::kforge_run_mma_sync},
      {"wgmma tf32x3_wgmma BN128", wgmma_bn128::kforge_run_wgmma_bn128},
      {"wgmma tf32x3_wgmma BN64", wgmma_bn64::kforge_run_wgmma_bn64},
      {"wgmma_rs STAGES4 FLUSH1", rs_s4f1::kforge_run_rs_s4f1},
      {"wgmma_rs STAGES4 FLUSH4", rs_s4f4::kforge_run_rs_s4f4},
      {"wgmma_rs STAGES3 FLUSH4", rs_s3f4::kforge_run_rs_s3f4},
      {"wgmma_rs STAGES3 FLUSH8", rs_s3f8::kforge_run_rs_s3f8},
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
      const std::vector<float> ms = time_calls("wgmma_tf32x3_probe", 2, iters,
                                               [&] { return kernel.launch(x, w, y, M, N, K); });
      const double median = ms[ms.size() / 2];
      std::printf("  %-34s median %.4f ms  min %.4f ms  %6.1f TFLOP/s  max err %.3e (%.2fx fp32's)  "
                  "unwritten %lld\n",
                  kernel.name, median, ms.front(), flops / (median * 1e-3) / 1e12, max_err,
                  fp32_max > 0 ? max_err / fp32_max : 0.0, static_cast<long long>(nan));
    }
  }
  return 0;
}
