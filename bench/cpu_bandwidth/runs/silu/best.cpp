// kforge candidate row_simd[PARALLEL=1] (family silu, backend cpu)
#define KF_PARALLEL 1
// SiLU / Swish (cpu): y[i] = x[i] * sigmoid(x[i]) = x[i] / (1 + exp(-x[i])) over a compact fp32
// tensor of any shape (torch.nn.functional.silu). The loop, its PARALLEL knob and the checks are
// include/kforge/elementwise.h's.
#include <kforge/elementwise.h>

#include <cmath>

namespace {

// PyTorch's own form. For x below about -88, exp(-x) overflows to inf and x / inf is -0 (the true
// value is below 1e-36 in magnitude), never NaN; x = -inf gives NaN as torch does. std::exp is a
// libm call that GCC does not vectorize without -ffast-math; threads still help.
struct Silu {
  float operator()(float v) const { return v / (1.0f + std::exp(-v)); }
};

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) { return kf::run_row_simd<Silu>(args); }
