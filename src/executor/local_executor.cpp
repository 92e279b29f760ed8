#include "executor/local_executor.h"

#include "executor/child.h"

namespace kforge::executor {

std::vector<TaskEnd> LocalExecutor::wait_any() {
  if (!pending_) return {};
  const TaskLaunch launch = std::move(*pending_);
  pending_.reset();
  ChildRun child = run_child(launch.argv, launch.log_path, launch.timeout_s, launch.echo_prefix);
  TaskEnd end;
  end.label = launch.label;
  end.status = child.status;
  end.timed_out = child.timed_out;
  end.stopped = child.stopped;
  end.wall_s = child.wall_s;
  end.last_error = child.last_error;
  return {end};
}

std::vector<TaskEnd> LocalExecutor::cancel_all() {
  if (!pending_) return {};
  TaskEnd end;
  end.label = pending_->label;
  end.stopped = true;
  pending_.reset();
  return {end};
}

}  // namespace kforge::executor
