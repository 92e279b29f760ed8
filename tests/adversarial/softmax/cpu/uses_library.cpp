// TRICK uses_library (must fail: rejected_by_policy). Delegates part of the work to BLAS
// (cblas_sasum for the row sum, cblas_sscal for the normalization): the search is for
// hand-written kernels, a library call measures the library, and linking arbitrary libraries
// widens what untrusted code can do. Caught by the static source policy (library headers and
// calls are not allowed) before compiling; built as the corpus builds it (no -lblas) the .so
// has undefined cblas_* symbols and would not even load.
#include <kforge/kernel.h>

#include <cblas.h>

#include <cmath>
#include <cstdint>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);

  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xp + r * cols;
    float* yr = yp + r * cols;
    float m = xr[0];
    for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, xr[c]);
    for (int64_t c = 0; c < cols; ++c) yr[c] = std::exp(xr[c] - m);
    const float sum = cblas_sasum(static_cast<int>(cols), yr, 1);  // all terms are positive
    cblas_sscal(static_cast<int>(cols), 1.0f / sum, yr, 1);
  }
  return 0;
}
