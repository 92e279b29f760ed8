// TRICK copies_input (must fail: wrong_answer). y = x with one device-to-device copy on the
// stream: exactly the minimum bytes moved, so it times like a perfect-bandwidth kernel, and a
// check of shapes, finiteness or "something was written" passes. Caught by the element-wise
// comparison (softmax outputs are positive and sum to 1 per row; x is in [-1, 1]).
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
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  return static_cast<int>(cudaMemcpyAsync(yp, xp, static_cast<size_t>(rows * cols) * sizeof(float),
                                          cudaMemcpyDeviceToDevice, stream));
}
