// TRICK segfault (must fail: worker_crashed). Writes through a null pointer (a "scratch buffer"
// it never allocated), killing the process with SIGSEGV. The evaluator must survive it: the
// kernel runs in a separate worker process whose death is reported, not propagated.
#include <kforge/kernel.h>

#include <cstdint>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  (void)xp;
  (void)yp;
  // Volatile through and through, so the compiler can neither see that the pointer is null
  // (and turn the store into a trap) nor drop the stores as dead.
  volatile float* volatile scratch = nullptr;
  for (int64_t i = 0; i < rows * cols; ++i) scratch[i] = 0.0f;
  return 0;
}
