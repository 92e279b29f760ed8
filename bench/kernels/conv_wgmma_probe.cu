// Checks and times grouped_conv's implicit_gemm_wgmma_rs (kernels/cuda/grouped_conv/
// implicit_gemm_wgmma_rs.cu) through its kforge_run entry point at one 2-D shape, against a
// float64 reference on sampled outputs: small and odd shapes (padding, stride, dilation, groups,
// K % 4 != 0) for compute-sanitizer, KernelBench L2/1's for the time. Inputs U[0, 1) as
// KernelBench's, weight and bias U[-1/sqrt(fan_in), 1/sqrt(fan_in)) as nn.Conv2d's.
// Build here (nvcc 13):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Ikernels \
//     -I<dlpack include> bench/kernels/conv_wgmma_probe.cu -o conv_wgmma_probe
//   ./conv_wgmma_probe N C H W CO KH KW [STRIDE PAD DIL GROUPS [ITERS]]
//   (L2/1: 128 64 128 128 128 3 3 1 0 1 1 20)
// Prints the median ms over ITERS calls (default 3) with TFLOP/s of fp32 work, the largest
// |error| on 2048 sampled outputs against float64 over that of a sequential fp32 sum of the same
// terms, and how many outputs stayed unwritten (NaN poison). Exit 1 when any is unwritten.
#include <cuda/grouped_conv/implicit_gemm_wgmma_rs.cu>

#include "probe_timing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

void check(cudaError_t err, const char* what) { probe::check(err, "conv_wgmma_probe", what); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr,
                 "usage: conv_wgmma_probe N C H W CO KH KW [STRIDE PAD DIL GROUPS [ITERS]]\n");
    return 2;
  }
  auto arg = [&](int i, int64_t fallback) { return argc > i ? std::atoll(argv[i]) : fallback; };
  const int64_t N = arg(1, 0), C = arg(2, 0), H = arg(3, 0), W = arg(4, 0), CO = arg(5, 0);
  const int64_t KH = arg(6, 0), KW = arg(7, 0), stride = arg(8, 1), pad = arg(9, 0),
                dil = arg(10, 1), groups = arg(11, 1);
  const int iters = static_cast<int>(arg(12, 3));
  const int64_t cig = C / groups, cog = CO / groups;
  const int64_t OH = (H + 2 * pad - dil * (KH - 1) - 1) / stride + 1;
  const int64_t OW = (W + 2 * pad - dil * (KW - 1) - 1) / stride + 1;
  const size_t nx = N * C * H * W, nw = CO * cig * KH * KW, ny = N * CO * OH * OW;
  std::vector<float> hx(nx), hw(nw), hb(CO), hy(ny);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  const float bound = 1.0f / std::sqrt(static_cast<float>(cig * KH * KW));
  std::uniform_real_distribution<float> wdist(-bound, bound);
  for (float& v : hx) v = uni(rng);
  for (float& v : hw) v = wdist(rng);
  for (float& v : hb) v = wdist(rng);
  float *x, *w, *b, *y;
  check(cudaMalloc(&x, nx * 4), "cudaMalloc x");
  check(cudaMalloc(&w, nw * 4), "cudaMalloc w");
  check(cudaMalloc(&b, CO * 4), "cudaMalloc b");
  check(cudaMalloc(&y, ny * 4), "cudaMalloc y");
  check(cudaMemcpy(x, hx.data(), nx * 4, cudaMemcpyHostToDevice), "copy x");
  check(cudaMemcpy(w, hw.data(), nw * 4, cudaMemcpyHostToDevice), "copy w");
  check(cudaMemcpy(b, hb.data(), CO * 4, cudaMemcpyHostToDevice), "copy b");
  check(cudaMemset(y, 0xff, ny * 4), "poison y");
  int64_t sx[5] = {N, C, 1, H, W}, sw[5] = {CO, cig, 1, KH, KW}, sb[1] = {CO},
          sy[5] = {N, CO, 1, OH, OW};
  DLTensor in[3] = {}, out[1] = {};
  auto fill = [](DLTensor& t, float* p, int64_t* shape, int ndim) {
    t.data = p;
    t.device = {kDLCUDA, 0};
    t.ndim = ndim;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
  };
  fill(in[0], x, sx, 5);
  fill(in[1], w, sw, 5);
  fill(in[2], b, sb, 1);
  fill(out[0], y, sy, 5);
  // stride, padding, dilation (d, h, w each), groups
  const double scalars[10] = {1, double(stride), double(stride), 0, double(pad), double(pad),
                              1, double(dil), double(dil), double(groups)};
  const kforge_args args{KFORGE_ABI_VERSION, 3, in, 1, out, 10, scalars, nullptr};
  const std::vector<float> ms =
      probe::time_calls("conv_wgmma_probe", 0, iters, [&] { return kforge_run(&args); });
  check(cudaMemcpy(hy.data(), y, ny * 4, cudaMemcpyDeviceToHost), "copy y");
  int64_t unwritten = 0;
  for (float v : hy) unwritten += std::isnan(v) ? 1 : 0;
  double max_err = 0.0, max_err_fp32 = 0.0;
  for (int sample = 0; sample < 2048; ++sample) {
    const int64_t n = rng() % N, co = rng() % CO, oh = rng() % OH, ow = rng() % OW;
    const int64_t g = co / cog;
    double ref = hb[co];
    float seq = hb[co];
    for (int64_t ci = 0; ci < cig; ++ci)
      for (int64_t r = 0; r < KH; ++r)
        for (int64_t s = 0; s < KW; ++s) {
          const int64_t ih = oh * stride - pad + r * dil, iw = ow * stride - pad + s * dil;
          if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
          const float xv = hx[((n * C + g * cig + ci) * H + ih) * W + iw];
          const float wv = hw[((co * cig + ci) * KH + r) * KW + s];
          ref += double(xv) * wv;
          seq += xv * wv;
        }
    const float got = hy[((n * CO + co) * OH + oh) * OW + ow];
    max_err = std::max(max_err, std::fabs(got - ref));
    max_err_fp32 = std::max(max_err_fp32, std::fabs(double(seq) - ref));
  }
  const double flops = 2.0 * N * CO * OH * OW * cig * KH * KW;
  const double median = ms[ms.size() / 2];
  std::printf("conv %lldx%lldx%lldx%lld -> %lld, %lldx%lld s%lld p%lld d%lld g%lld: median %.4f "
              "ms (%d calls, %.1f TFLOP/s), max err %.3e (%.2fx a sequential fp32 sum's) on 2048 "
              "samples, unwritten %lld\n",
              (long long)N, (long long)C, (long long)H, (long long)W, (long long)CO,
              (long long)KH, (long long)KW, (long long)stride, (long long)pad, (long long)dil,
              (long long)groups, median, iters, flops / median / 1e9, max_err,
              max_err / std::max(max_err_fp32, 1e-30), (long long)unwritten);
  return unwritten == 0 ? 0 : 1;
}
