// The `local` executor: each task's `kforge optimize` is a child process of the suite on this
// machine, one task at a time (what `kforge suite` always did): its output goes to the task's
// log, it is killed (process group) at its timeout or on Ctrl-C (executor/child.h).
#pragma once

#include <optional>

#include "executor/executor.h"

namespace kforge::executor {

class LocalExecutor final : public Executor {
 public:
  /// One slot: a started task runs to its end inside the next wait_any().
  std::size_t free_slots() override { return pending_ ? 0 : 1; }
  void start(const TaskLaunch& launch) override { pending_ = launch; }
  std::vector<TaskEnd> wait_any() override;
  /// Nothing runs between calls (wait_any runs the task to its end): returns the task started
  /// and not yet run, if any, as stopped.
  std::vector<TaskEnd> cancel_all() override;
  std::size_t in_flight() const override { return pending_ ? 1 : 0; }

 private:
  std::optional<TaskLaunch> pending_;
};

}  // namespace kforge::executor
