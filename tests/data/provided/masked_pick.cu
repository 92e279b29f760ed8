// The masked row sum plus the picked entry of python/tests/problems/masked_pick.py, on the cuda
// backend: one warp per row. KF_IGNORE_MASK / KF_IGNORE_IDS build the wrong versions the test
// expects to fail: a kernel that assumes an all-true mask, or class id 0 everywhere.
#include <kforge/kernel.h>

#include <cstdint>

namespace {

__global__ void masked_pick(const float* x, const uint8_t* mask, const int64_t* ids, float* y,
                            int64_t rows, int64_t cols) {
  const int64_t row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  double sum = 0.0;
  for (int64_t c = lane; c < cols; c += 32) {
#ifdef KF_IGNORE_MASK
    sum += x[row * cols + c];
#else
    if (mask[row * cols + c] != 0) sum += x[row * cols + c];
#endif
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xFFFFFFFFu, sum, offset);
  if (lane == 0) {
#ifdef KF_IGNORE_IDS
    const int64_t id = 0;
#else
    const int64_t id = ids[row] < 0 || ids[row] >= cols ? 0 : ids[row];
#endif
    y[row] = static_cast<float>(sum + x[row * cols + id]);
  }
}

}  // namespace

extern "C" int kforge_run(const kforge_args* args) {
  const DLTensor& x = args->inputs[0];
  const DLTensor& mask = args->inputs[1];
  const DLTensor& ids = args->inputs[2];
  if (mask.dtype.code != kDLUInt || mask.dtype.bits != 8 || ids.dtype.bits != 64) return 2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  constexpr int kRowsPerBlock = 8;
  const auto blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  masked_pick<<<blocks, 32 * kRowsPerBlock, 0, static_cast<cudaStream_t>(args->stream)>>>(
      static_cast<const float*>(x.data), static_cast<const uint8_t*>(mask.data),
      static_cast<const int64_t*>(ids.data), static_cast<float*>(args->outputs[0].data), rows,
      cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
