// Reference L1 loss (cuda): loss = mean |pred - target| over every element. One block of 256
// threads, each summing a grid-stride slice in double, then a shared-memory tree in double, so
// the result differs from the cpu reference's index-order sum only by double rounding.
// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype, -4 non-compact,
// otherwise the cudaError_t of the launch.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;

bool is_f32(const DLTensor& t) {
  return t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}

bool compact(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expected = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] > 1 && t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

template <typename T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

__global__ void l1_loss_reference(const float* p, const float* t, int64_t n, float* loss) {
  __shared__ double partial[kThreads];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    sum += fabs(static_cast<double>(p[i]) - static_cast<double>(t[i]));
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *loss = static_cast<float>(n > 0 ? partial[0] / static_cast<double>(n) : 0.0);
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1) return -1;
  const DLTensor& pred = args->inputs[0];
  const DLTensor& target = args->inputs[1];
  const DLTensor& loss = args->outputs[0];
  if (pred.ndim != 2 || target.ndim != 2 || loss.ndim != 1 || loss.shape[0] != 1 ||
      pred.shape[0] != target.shape[0] || pred.shape[1] != target.shape[1]) {
    return -2;
  }
  if (!is_f32(pred) || !is_f32(target) || !is_f32(loss)) return -3;
  if (!compact(pred) || !compact(target)) return -4;
  const int64_t n = pred.shape[0] * pred.shape[1];
  l1_loss_reference<<<1, kThreads, 0, static_cast<cudaStream_t>(args->stream)>>>(
      data_of<const float>(pred), data_of<const float>(target), n, data_of<float>(loss));
  return static_cast<int>(cudaGetLastError());
}
