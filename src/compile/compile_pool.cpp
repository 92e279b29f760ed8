#include "compile/compile_pool.h"

#include "common/cpus.h"

namespace kforge::compile {

CompilePool::CompilePool(Compiler& compiler, int depth) : compiler_(compiler) {
  if (depth <= 0) depth = usable_cpus();
  for (int i = 0; i < depth; ++i) threads_.emplace_back([this] { run(); });
}

CompilePool::~CompilePool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

std::future<Artifact> CompilePool::submit(CompileJob job) {
  std::packaged_task<Artifact()> task(
      [this, job = std::move(job)] { return compiler_.compile(job); });
  std::future<Artifact> result = task.get_future();
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
  }
  ready_.notify_one();
  return result;
}

void CompilePool::run() {
  for (;;) {
    std::packaged_task<Artifact()> task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace kforge::compile
