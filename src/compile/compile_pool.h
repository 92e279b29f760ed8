// The `compile` concurrency pool: builds several candidates at once (depth = cores by default)
// while the worker times others.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "compile/compiler.h"

namespace kforge::compile {

class CompilePool {
 public:
  /// `depth` threads share `compiler` (which must be thread-safe); depth <= 0 means the number
  /// of hardware threads.
  CompilePool(Compiler& compiler, int depth);
  ~CompilePool();
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  /// Queues `job`; the future yields its Artifact (or rethrows a harness Error such as a
  /// missing compiler).
  std::future<Artifact> submit(CompileJob job);
  int depth() const { return static_cast<int>(threads_.size()); }

 private:
  void run();

  Compiler& compiler_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<Artifact()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace kforge::compile
