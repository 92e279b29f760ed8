// SiLU / Swish (cpu): y[i] = x[i] * sigmoid(x[i]) = x[i] / (1 + exp(-x[i])) over a compact fp32
// tensor of any shape (torch.nn.functional.silu). The loop, its PARALLEL knob and the checks are
// kernels/cpu/common/elementwise.h's.
#include <cpu/common/elementwise.h>

namespace {

// PyTorch's own form. For x below about -88, exp(-x) is +inf and x / inf is -0 (the true value
// is below 1e-36 in magnitude), never NaN; x = -inf gives NaN as torch does. exp is
// kf::exp_vectorizable (elementwise.h), not std::exp: libm's expf is a call GCC does not
// vectorize without -ffast-math, and silu ran at 21% of STREAM bandwidth on 2 cores with it
// (bench/cpu_bandwidth).
struct Silu {
  float operator()(float v) const { return v / (1.0f + kf::exp_vectorizable(-v)); }
};

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) { return kf::run_row_simd<Silu>(args); }
