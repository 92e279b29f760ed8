// HONEST (must pass: ok). y = alpha * x in fp32 (alpha = 1e30 rounded to float), OpenMP +
// simd. Outputs are as large as 1e30 and differ from the double reference by ~1e-7 relative,
// ~1e23 absolute: only a relative tolerance accepts it, which is what this candidate protects.
#include <kforge/kernel.h>

#include <cstdint>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 1 || y.ndim != 1 || y.shape[0] != x.shape[0]) return -2;
  const int64_t n = x.shape[0];
  const float alpha = static_cast<float>(args->scalars[0]);
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);

#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) yp[i] = alpha * xp[i];
  return 0;
}
