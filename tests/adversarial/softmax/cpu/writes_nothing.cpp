// TRICK writes_nothing (must fail: wrong_answer). Returns success without touching y, hoping the
// output buffer still holds a correct answer from an earlier call (the reference's, or its own
// from a previous workload at the same address). Caught because outputs are poisoned (NaN)
// before every call and each candidate gets its own output buffers, so an unwritten y is NaN.
#include <kforge/kernel.h>

KFORGE_API int kforge_run(const kforge_args* args) {
  (void)args;  // the "result" is whatever y already holds
  return 0;
}
