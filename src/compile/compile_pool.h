// The `compile` concurrency pool: builds several candidates at once (depth = usable CPUs by default)
// while the worker times others.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "compile/compiler.h"

namespace kforge::compile {

/// Where the search sends its builds: the seam between the optimizer and the compilers.
/// CompilePool (below) is the real one; a test or a simulation runner passes a fake.
class BuildQueue {
 public:
  virtual ~BuildQueue() = default;
  /// Queues `job`; the future yields its Artifact (a compile error is a value) or rethrows a
  /// harness Error such as a missing compiler.
  virtual std::future<Artifact> submit(CompileJob job) = 0;
  /// The toolchain that builds `backend`'s candidates, for provenance ("g++ 12.2.0"). Throws
  /// Error if it is absent.
  virtual std::string toolchain(const std::string& backend) = 0;
};

class CompilePool : public BuildQueue {
 public:
  /// `depth` threads share `compiler` (which must be thread-safe); depth <= 0 means one per CPU
  /// this process may use (usable_cpus(), common/cpus.h).
  CompilePool(Compiler& compiler, int depth);
  ~CompilePool() override;
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  /// Queues `job` for the next free thread. A pool being destroyed builds what is queued first.
  std::future<Artifact> submit(CompileJob job) override;
  /// The compiler's toolchain (Compiler::toolchain).
  std::string toolchain(const std::string& backend) override {
    return compiler_.toolchain(backend);
  }
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
