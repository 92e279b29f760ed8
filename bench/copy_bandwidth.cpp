// Measures the copy bandwidth ceiling that kforge's achieved-bandwidth numbers are compared to:
// a large device-to-device cudaMemcpyAsync on `cuda`, a large memcpy on `cpu` split over
// all hardware threads.
// Counts bytes read plus bytes written; reports the median of repeated copies as JSON.
// On `cpu` it also reports STREAM's "scale" kernel (y[i] = q * x[i] over fp32, McCalpin, "Memory
// Bandwidth and Machine Balance in Current High Performance Computers", IEEE TCCA Newsletter
// 1995), split over all hardware threads and counted the same way (4 bytes read + 4 written per
// element, write-allocate traffic not counted): the ceiling for kernels that read one tensor
// and write another with ordinary stores, which memcpy's non-temporal stores can exceed.
//
//   kforge_bench_copy cpu|cuda [bytes]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int bench_cuda(size_t bytes) {
  void* a = nullptr;
  void* b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc of %zu bytes failed: no CUDA device?\n", bytes);
    return 1;
  }
  cudaMemset(a, 1, bytes);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> ms;
  for (int i = 0; i < 25; ++i) {
    cudaEventRecord(start);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float elapsed = 0;
    cudaEventElapsedTime(&elapsed, start, stop);
    if (i >= 5) ms.push_back(elapsed);
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  double m = median(ms);
  std::printf("{\"backend\": \"cuda\", \"device\": \"%s\", \"bytes_per_copy\": %zu, "
              "\"median_ms\": %.4f, \"copy_gbps\": %.1f}\n",
              prop.name, bytes, m, 2.0 * bytes / (m * 1e-3) * 1e-9);
  return 0;
}

int bench_cpu(size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 0);
  std::vector<double> ms;
  for (int i = 0; i < 12; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    // One chunk per hardware thread, as the parallel kernels use them all.
    unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> workers;
    size_t chunk = (bytes + threads - 1) / threads;
    for (unsigned t = 0; t < threads; ++t) {
      size_t begin = std::min(bytes, t * chunk), end = std::min(bytes, begin + chunk);
      workers.emplace_back([&, begin, end] { std::memcpy(b.data() + begin, a.data() + begin, end - begin); });
    }
    for (std::thread& w : workers) w.join();
    auto t1 = std::chrono::steady_clock::now();
    if (i >= 2) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  double m = median(ms);
  a.clear();
  a.shrink_to_fit();
  b.clear();
  b.shrink_to_fit();
  const size_t n = bytes / sizeof(float);
  std::vector<float> x(n, 1.0f), y(n, 0.0f);
  std::vector<double> scale_ms;
  for (int i = 0; i < 12; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> workers;
    size_t chunk = (n + threads - 1) / threads;
    for (unsigned t = 0; t < threads; ++t) {
      size_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
      workers.emplace_back([&, begin, end] {
        float* __restrict__ out = y.data();
        const float* __restrict__ in = x.data();
        for (size_t k = begin; k < end; ++k) out[k] = 3.0f * in[k];
      });
    }
    for (std::thread& w : workers) w.join();
    auto t1 = std::chrono::steady_clock::now();
    if (i >= 2) scale_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  double s = median(scale_ms);
  std::printf("{\"backend\": \"cpu\", \"bytes_per_copy\": %zu, \"median_ms\": %.4f, "
              "\"copy_gbps\": %.1f, \"stream_scale_ms\": %.4f, \"stream_scale_gbps\": %.1f, "
              "\"check\": %d}\n",
              bytes, m, 2.0 * bytes / (m * 1e-3) * 1e-9, s, 2.0 * n * sizeof(float) / (s * 1e-3) * 1e-9,
              static_cast<int>(y[n / 2]));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = argc > 1 ? argv[1] : "cpu";
  size_t bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10)
                          : (backend == "cuda" ? size_t{1} << 31 : size_t{1} << 28);
  return backend == "cuda" ? bench_cuda(bytes) : bench_cpu(bytes);
}
