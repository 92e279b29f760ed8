// Reference L1 loss (cpu): loss = mean |pred - target| over every element, summed in double in
// index order and rounded once to fp32. Trusted and plain: single-threaded.
// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype, -4 non-compact.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>

namespace {

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
  const float* p = data_of<const float>(pred);
  const float* t = data_of<const float>(target);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::fabs(static_cast<double>(p[i]) - t[i]);
  *data_of<float>(loss) = static_cast<float>(n > 0 ? sum / static_cast<double>(n) : 0.0);
  return 0;
}
