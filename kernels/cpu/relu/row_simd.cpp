// ReLU (cpu): y[i] = x[i] < 0 ? 0 : x[i] over a compact fp32 tensor of any shape. The loop, its
// PARALLEL knob and the checks are kernels/cpu/common/elementwise.h's.
#include <cpu/common/elementwise.h>

namespace {

// x < 0 is false for NaN, so NaN passes through, as in torch.relu.
struct Relu {
  float operator()(float v) const { return v < 0.0f ? 0.0f : v; }
};

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) { return kf::run_row_simd<Relu>(args); }
