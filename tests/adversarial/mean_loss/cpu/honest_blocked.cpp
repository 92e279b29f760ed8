// Honest L1 loss (cpu): per-row sums in double, then the mean over rows x cols.
#include <kforge/kernel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace {

template <typename T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1) return -1;
  const int64_t rows = args->inputs[0].shape[0], cols = args->inputs[0].shape[1];
  const float* p = data_of<const float>(args->inputs[0]);
  const float* t = data_of<const float>(args->inputs[1]);
  float* loss = data_of<float>(args->outputs[0]);
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double row = 0.0;
    for (int64_t c = 0; c < cols; ++c) row += std::fabs(double(p[r * cols + c]) - t[r * cols + c]);
    total += row;
  }
  *loss = static_cast<float>(rows * cols > 0 ? total / double(rows * cols) : 0.0);
  return 0;
}
