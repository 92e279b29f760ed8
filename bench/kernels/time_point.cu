// Times built kernel candidates (shared objects exporting kforge_run) of the row-wise families
// at one shape, for kernel development: faster than a `kforge optimize` run when the question is
// "which of these few points is fastest at this size", and easy to run under Nsight Compute.
// It does not check results (the correctness gate does: tests/kernel_families_test.cpp).
//
//   time_point OP ROWS COLS DTYPE ITERS LIB.so [LIB.so ...]
//     OP     rows (x -> y: softmax, log_softmax), rmsnorm (x, w -> y, eps = 1e-5),
//            layernorm (x, w, b -> y, eps = 1e-5) or channels (x [n, c, s] -> y, eps = 1e-5:
//            rmsnorm_channels; ROWS is then NxC, e.g. 112x64, and COLS is s)
//     DTYPE  f32, f16 or bf16
//   prints per library: median and min ms over ITERS calls, each after a 256 MiB write that
//   evicts L2 (cold cache, as kforge's timing), and GB/s of the minimum traffic (x and y once,
//   w and b once).
// Build on a machine with a GPU: nvcc -std=c++17 -O2 -Iinclude -I<dlpack include dir>
//   bench/kernels/time_point.cu -o time_point -ldl
#include <kforge/kernel.h>

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "time_point: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(2);
  }
}

__global__ void fill(unsigned char* p, int64_t bytes, int elem_bytes, uint32_t seed) {
  const int64_t n = bytes / elem_bytes;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float v = (h & 0xffffff) / 16777216.0f * 4.0f - 2.0f;  // uniform in [-2, 2)
    if (elem_bytes == 4) {
      reinterpret_cast<float*>(p)[i] = v;
    } else {
      // bf16 or f16 bit pattern of v is not needed exactly: small integers in both formats.
      reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(0x3c00 + (h & 0x3ff));
    }
  }
}

DLTensor tensor(void* data, int ndim, int64_t* shape, DLDataType dtype) {
  DLTensor t = {};
  t.data = data;
  t.device = DLDevice{kDLCUDA, 0};
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: time_point OP ROWS COLS DTYPE ITERS LIB.so [LIB.so ...]\n");
    return 1;
  }
  const std::string op = argv[1];
  int64_t rows = std::atoll(argv[2]), cols = std::atoll(argv[3]);
  const bool channels = op == "channels";
  int64_t channel_count = 1;
  if (channels) {
    const char* times = std::strchr(argv[2], 'x');
    if (times == nullptr) {
      std::fprintf(stderr, "time_point: channels needs ROWS as NxC\n");
      return 1;
    }
    channel_count = std::atoll(times + 1);
    rows *= channel_count;  // x holds n * c rows of s
  }
  const std::string dtype_name = argv[4];
  const int iters = std::atoi(argv[5]);
  DLDataType dtype{kDLFloat, 32, 1};
  if (dtype_name == "f16") dtype = DLDataType{kDLFloat, 16, 1};
  if (dtype_name == "bf16") dtype = DLDataType{kDLBfloat, 16, 1};
  const int eb = dtype.bits / 8;
  const bool layernorm = op == "layernorm";
  const bool rmsnorm = op == "rmsnorm";

  unsigned char *x = nullptr, *y = nullptr, *w = nullptr, *b = nullptr, *flush = nullptr;
  const int64_t xb = rows * cols * eb, wb = cols * eb;
  const int64_t flush_bytes = int64_t{256} << 20;
  check(cudaMalloc(&x, xb), "cudaMalloc x");
  check(cudaMalloc(&y, xb), "cudaMalloc y");
  check(cudaMalloc(&flush, flush_bytes), "cudaMalloc flush");
  fill<<<1024, 256>>>(x, xb, eb, 1);
  if (layernorm || rmsnorm) {
    check(cudaMalloc(&w, wb), "cudaMalloc w");
    check(cudaMalloc(&b, wb), "cudaMalloc b");
    fill<<<1024, 256>>>(w, wb, eb, 2);
    fill<<<1024, 256>>>(b, wb, eb, 3);
  }
  check(cudaDeviceSynchronize(), "fill");
  int64_t shape2[2] = {rows, cols}, shape1[1] = {cols};
  int64_t shape3[3] = {rows / channel_count, channel_count, cols};
  DLTensor inputs[3] = {channels ? tensor(x, 3, shape3, dtype) : tensor(x, 2, shape2, dtype),
                        tensor(w, 1, shape1, dtype), tensor(b, 1, shape1, dtype)};
  DLTensor output = channels ? tensor(y, 3, shape3, dtype) : tensor(y, 2, shape2, dtype);
  const double eps = 1e-5;
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  kforge_args args = {};
  args.abi_version = KFORGE_ABI_VERSION;
  args.num_inputs = layernorm ? 3 : rmsnorm ? 2 : 1;
  args.inputs = inputs;
  args.num_outputs = 1;
  args.outputs = &output;
  args.num_scalars = layernorm || rmsnorm || channels ? 1 : 0;
  args.scalars = &eps;
  args.stream = stream;
  const double bytes = 2.0 * xb + (layernorm ? 2.0 * wb : rmsnorm ? 1.0 * wb : 0.0);

  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  for (int l = 6; l < argc; ++l) {
    void* handle = dlopen(argv[l], RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      std::printf("%s: dlopen: %s\n", argv[l], dlerror());
      continue;
    }
    auto run = reinterpret_cast<int (*)(const kforge_args*)>(dlsym(handle, "kforge_run"));
    if (run == nullptr) {
      std::printf("%s: no kforge_run\n", argv[l]);
      continue;
    }
    std::vector<float> ms;
    for (int it = 0; it < iters + 2; ++it) {
      check(cudaMemsetAsync(flush, it & 0xff, flush_bytes, stream), "flush");
      check(cudaEventRecord(start, stream), "record");
      const int rc = run(&args);
      check(cudaEventRecord(stop, stream), "record");
      check(cudaEventSynchronize(stop), "kernel");
      if (rc != 0) {
        std::printf("%s: kforge_run returned %d\n", argv[l], rc);
        break;
      }
      float t = 0.0f;
      check(cudaEventElapsedTime(&t, start, stop), "elapsed");
      if (it >= 2) ms.push_back(t);
    }
    if (ms.empty()) continue;
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    std::printf("%-60s median %.4f ms  min %.4f ms  %.0f GB/s\n", argv[l], median, ms.front(),
                bytes / (median * 1e-3) / 1e9);
  }
  return 0;
}
