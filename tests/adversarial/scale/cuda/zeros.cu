// TRICK zeros (must fail: wrong_answer). cudaMemsetAsync(y, 0) on the stream. At this scale the
// true outputs are ~1e30, so only a broken tolerance (one that rescales or clamps the error by
// the output magnitude the wrong way, or skips huge values as "overflow") could accept it; the
// relative criterion rejects every element.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cstdint>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& y = args->outputs[0];
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  return static_cast<int>(cudaMemsetAsync(yp, 0, static_cast<size_t>(kforge_numel(&y)) * sizeof(float),
                                          static_cast<cudaStream_t>(args->stream)));
}
