// GELU (cpu, erf form): y[i] = 0.5 x[i] (1 + erf(x[i] / sqrt(2))) over a compact fp32 tensor of
// any shape (torch.nn.functional.gelu, approximate='none'). The loop, its PARALLEL knob and the
// checks are kernels/cpu/common/elementwise.h's.
#include <cpu/common/elementwise.h>

namespace {

// The exact (erf) GELU of F.gelu's default. kf::erf_vectorizable (kernels/cpu/common/vmath.h,
// within 1 ulp of erf), not std::erf: libm's erff is a call GCC does not vectorize without
// -ffast-math.
struct Gelu {
  float operator()(float v) const {
    const float half = 0.5f * v;  // half + half erf: one multiply-add less than 0.5 v (1 + erf)
    return half + half * kf::erf_vectorizable(v * 0.70710678118654752f);
  }
};

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) { return kf::run_row_simd<Gelu>(args); }
