#include "search/worker_pool.h"

#include <exception>
#include <mutex>
#include <thread>

#include "common/error.h"

namespace kforge::search {

WorkerPool::WorkerPool(std::vector<worker::Worker*> workers) : workers_(std::move(workers)) {
  if (workers_.empty()) throw Error("worker pool: no candidate worker");
  for (const worker::Worker* w : workers_) {
    if (w == nullptr) throw Error("worker pool: a null worker");
  }
}

std::vector<bool> WorkerPool::run(size_t jobs,
                                  const std::function<void(size_t job, size_t worker)>& job,
                                  const std::function<bool()>& keep_going) {
  std::vector<bool> ran(jobs, false);
  std::vector<std::exception_ptr> errors(jobs);
  std::mutex mutex;  // guards next, stopped, ran
  size_t next = 0;
  bool stopped = false;
  auto serve = [&](size_t worker) {
    for (;;) {
      size_t mine = 0;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (stopped || next >= jobs) return;
        if (keep_going && !keep_going()) {
          stopped = true;
          return;
        }
        mine = next++;
        ran[mine] = true;
      }
      try {
        job(mine, worker);
      } catch (...) {
        errors[mine] = std::current_exception();
        std::lock_guard<std::mutex> lock(mutex);
        stopped = true;  // a harness error: start nothing more
      }
    }
  };
  if (workers_.size() == 1 || jobs <= 1) {
    serve(0);
  } else {
    std::vector<std::thread> threads;
    const size_t used = std::min(workers_.size(), jobs);
    for (size_t w = 0; w < used; ++w) threads.emplace_back(serve, w);
    for (std::thread& t : threads) t.join();
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return ran;
}

}  // namespace kforge::search
