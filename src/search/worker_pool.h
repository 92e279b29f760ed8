// The candidate worker pool: one worker process per device (cuda, `--devices 0,1,...`) or N
// worker processes (cpu, `--workers N`), each serving one request at a time.
//
// The optimizer hands the pool a batch of jobs in the plan's order; each worker takes the next
// job not yet started, so a batch of n jobs runs min(n, workers) at a time, one per worker.
// Which worker runs which job, and the order in which jobs finish, depend on latencies; the pool
// returns when every started job has finished, and the caller applies the results in job order,
// so that records, decisions and memory updates do not depend on who finished first.
// With one worker the jobs run on the caller's thread, one after the other.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "worker/worker.h"

namespace kforge::search {

class WorkerPool {
 public:
  /// `workers` (at least one; not owned, each used by one thread at a time).
  explicit WorkerPool(std::vector<worker::Worker*> workers);

  size_t size() const { return workers_.size(); }
  worker::Worker& at(size_t index) const { return *workers_.at(index); }

  /// Runs job(i, w) for i = 0..jobs-1 with w the index of the worker that runs it; a worker
  /// takes the lowest job index not yet started. `keep_going` is asked before each job starts
  /// (null: always); once it says false no further job starts. Returns, for each job, whether it
  /// ran. When jobs throw, waits for the running ones and rethrows the exception of the lowest
  /// job index.
  std::vector<bool> run(size_t jobs, const std::function<void(size_t job, size_t worker)>& job,
                        const std::function<bool()>& keep_going = {});

 private:
  std::vector<worker::Worker*> workers_;
};

}  // namespace kforge::search
