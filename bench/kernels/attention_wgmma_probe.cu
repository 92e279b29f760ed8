// Checks and times attention's unfused_wgmma_rs (kernels/cuda/attention/unfused_wgmma_rs.cu)
// through its kforge_run entry point at one shape, against a float64 reference on sampled
// outputs: small and odd shapes for compute-sanitizer (memcheck, racecheck), KernelBench L1/97's
// for the time. Inputs U[0, 1) as KernelBench's.
// Build here (nvcc 13):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Ikernels \
//     -I<dlpack include> bench/kernels/attention_wgmma_probe.cu -o attention_wgmma_probe
//   ./attention_wgmma_probe B S D [ITERS]
// Prints the median ms over ITERS calls (default 3), the largest |error| on 512 sampled outputs
// against float64 and how many outputs stayed unwritten (NaN poison).
#include <cuda/attention/unfused_wgmma_rs.cu>

#include "probe_timing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

void check(cudaError_t err, const char* what) { probe::check(err, "attention_wgmma_probe", what); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: attention_wgmma_probe B S D [ITERS]\n");
    return 2;
  }
  const int64_t B = std::atoll(argv[1]), S = std::atoll(argv[2]), D = std::atoll(argv[3]);
  const int iters = argc > 4 ? std::atoi(argv[4]) : 3;
  const size_t n = static_cast<size_t>(B * S * D);
  std::vector<float> hq(n), hk(n), hv(n), ho(n);
  std::mt19937_64 rng(97);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  for (auto* h : {&hq, &hk, &hv})
    for (float& x : *h) x = uni(rng);
  float *q, *k, *v, *o;
  for (float** p : {&q, &k, &v, &o}) check(cudaMalloc(p, n * sizeof(float)), "cudaMalloc");
  check(cudaMemcpy(q, hq.data(), n * 4, cudaMemcpyHostToDevice), "copy q");
  check(cudaMemcpy(k, hk.data(), n * 4, cudaMemcpyHostToDevice), "copy k");
  check(cudaMemcpy(v, hv.data(), n * 4, cudaMemcpyHostToDevice), "copy v");
  check(cudaMemset(o, 0xff, n * 4), "poison o");
  int64_t shape[3] = {B, S, D};
  DLTensor in[3] = {}, out[1] = {};
  auto fill = [&shape](DLTensor& t, float* p) {
    t.data = p;
    t.device = {kDLCUDA, 0};
    t.ndim = 3;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
  };
  fill(in[0], q);
  fill(in[1], k);
  fill(in[2], v);
  fill(out[0], o);
  const kforge_args args{KFORGE_ABI_VERSION, 3, in, 1, out, 0, nullptr, nullptr};
  const std::vector<float> ms =
      probe::time_calls("attention_wgmma_probe", 0, iters, [&] { return kforge_run(&args); });
  check(cudaMemcpy(ho.data(), o, n * 4, cudaMemcpyDeviceToHost), "copy o");
  int64_t unwritten = 0;
  for (float x : ho) unwritten += std::isnan(x) ? 1 : 0;
  double max_err = 0.0;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> p(S);
  for (int sample = 0; sample < 512; ++sample) {
    const int64_t b = rng() % B, i = rng() % S, j = rng() % D;
    double row_max = -1e300, sum = 0.0, acc = 0.0;
    for (int64_t t = 0; t < S; ++t) {
      double dot = 0.0;
      for (int64_t c = 0; c < D; ++c) dot += double(hq[(b * S + i) * D + c]) * hk[(b * S + t) * D + c];
      p[t] = dot * scale;
      row_max = std::max(row_max, p[t]);
    }
    for (int64_t t = 0; t < S; ++t) sum += (p[t] = std::exp(p[t] - row_max));
    for (int64_t t = 0; t < S; ++t) acc += p[t] / sum * hv[(b * S + t) * D + j];
    max_err = std::max(max_err, std::fabs(acc - ho[(b * S + i) * D + j]));
  }
  std::printf("B %lld S %lld D %lld: median %.4f ms (%d calls), max err %.3e on 512 samples, "
              "unwritten %lld\n",
              static_cast<long long>(B), static_cast<long long>(S), static_cast<long long>(D),
              ms[ms.size() / 2], iters, max_err, static_cast<long long>(unwritten));
  return unwritten == 0 ? 0 : 1;
}
