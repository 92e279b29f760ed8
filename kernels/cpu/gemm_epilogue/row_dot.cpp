// Y = epilogue(X W^T + b) (cpu), one dot product per output element.
// Each y[m, n] is the dot product of row m of x and row n of weight (both contiguous in K), with
// ACCUMULATORS interleaved fp32 partial sums (1 = one serial chain; more lets the compiler keep
// several vector accumulators in flight), then bias and the epilogue (KF_EPILOGUE) at the store.
// PARALLEL = 1 spreads the rows of y over OpenMP threads. fp32 products and sums throughout.
#include <common/epilogue.h>
#include <common/gemm_args.h>
#include <cpu/common/dot.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_ACCUMULATORS
#define KF_ACCUMULATORS 8
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_ACCUMULATORS == 1 || KF_ACCUMULATORS == 4 || KF_ACCUMULATORS == 8 ||
                  KF_ACCUMULATORS == 16,
              "ACCUMULATORS is 1, 4, 8 or 16");

KFORGE_API int kforge_run(const kforge_args* args) {
  kf::GemmArgs g;
  if (const int code = kf::gemm_args(args, g); code != 0) return code;
  const auto epilogue = KF_EPILOGUE;
#pragma omp parallel for schedule(static) if (KF_PARALLEL)
  for (int64_t m = 0; m < g.m; ++m) {
    const float* xr = g.x + m * g.k;
    float* yr = g.y + m * g.n;
    for (int64_t n = 0; n < g.n; ++n) {
      const float acc = kf::interleaved_dot<KF_ACCUMULATORS>(xr, g.w + n * g.k, g.k) +
                        (g.bias ? g.bias[n] : 0.0f);
      yr[n] = epilogue(acc, g.operands, n);
    }
  }
  return 0;
}
