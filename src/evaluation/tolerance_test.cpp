#include "evaluation/tolerance.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <span>

namespace kforge::evaluation {
namespace {

TEST(ToleranceFor, AWorkloadsOwnAtolHoldsOnThatWorkloadOnly) {
  Tolerance task;
  task.rtol = 1e-4;
  task.atol = 1e-6;
  task.workload_atol["problem"] = 0.25;
  EXPECT_DOUBLE_EQ(tolerance_for(task, DType::f32, "problem").atol, 0.25);
  EXPECT_DOUBLE_EQ(tolerance_for(task, DType::f32, "gate_small").atol, 1e-6);
  EXPECT_DOUBLE_EQ(tolerance_for(task, DType::f32, "gate_small").rtol, 1e-4);
  // A loss of 8.0 computed as 8.1 (a mean over part of the rows): within the problem's atol,
  // a wrong answer on the gate workload.
  const float expected = 8.0f, got = 8.1f;
  const auto bytes = [](const float& value) {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(&value), sizeof value);
  };
  EXPECT_TRUE(compare_output(DType::f32, bytes(got), bytes(expected), {},
                             tolerance_for(task, DType::f32, "problem"))
                  .passed);
  EXPECT_FALSE(compare_output(DType::f32, bytes(got), bytes(expected), {},
                              tolerance_for(task, DType::f32, "gate_small"))
                   .passed);
}

}  // namespace
}  // namespace kforge::evaluation
