// TRICK zeros (must fail: wrong_answer). cudaMemsetAsync(y, 0) on the stream: every element is
// written and finite and the "kernel" runs at memset speed; at wide rows every true value is
// small (~1e-4), so an absolute-only check with a loose atol, or one that only looks for NaN,
// passes it. Caught by the relative term of the element-wise tolerance.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cstdint>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (rows == 0 || cols == 0) return 0;
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  return static_cast<int>(
      cudaMemsetAsync(yp, 0, static_cast<size_t>(rows * cols) * sizeof(float), stream));
}
