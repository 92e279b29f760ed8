// The tolerance a task's output is judged with: the task's rtol/atol, and its norm-wise bound,
// or the dtype's default bound scaled by the task's rtol (comparison.h, tolerance_with).
#pragma once

#include "evaluation/comparison.h"
#include "core/task.h"

namespace kforge::evaluation {

/// The tolerance of an output of dtype `output_dtype` on workload `workload` (whose own atol,
/// Tolerance::workload_atol, replaces the task's when it has one).
inline ToleranceSpec tolerance_for(const Tolerance& task_tolerance, DType output_dtype,
                                   const std::string& workload) {
  ToleranceSpec spec =
      tolerance_with(output_dtype, task_tolerance.rtol, task_tolerance.atol_for(workload));
  if (task_tolerance.normalized) spec.max_normalized_error = *task_tolerance.normalized;
  return spec;
}

}  // namespace kforge::evaluation
