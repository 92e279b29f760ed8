// TRICK writes_nothing (must fail: wrong_answer). Launches nothing and returns success, hoping
// y still holds a correct answer from an earlier call (the reference's output, if the evaluator
// reuses one buffer for both, or its own from a previous call at the same address). Caught
// because outputs are poisoned (NaN) before every call and the candidate has its own buffers.
#include <kforge/kernel.h>

KFORGE_API int kforge_run(const kforge_args* args) {
  (void)args;  // the "result" is whatever y already holds
  return 0;
}
