// Real compilers (each backend's Toolchain: g++ for `cpu`, nvcc for `cuda`), run as subprocesses
// with a timeout, with a content-addressed artifact cache on disk (checked before compiling, as
// Kernel Tuner does).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "compile/toolchain.h"

namespace kforge::compile {

/// The toolchain that builds `backend`'s sources; throws Error for a backend it does not know.
/// src/backends/backend.h's toolchain_for is the real one; tests may pass their own.
using ToolchainLookup = std::function<const Toolchain&(const std::string& backend)>;

class ToolchainCompiler : public Compiler {
 public:
  /// Compiles with `toolchains(job.backend)`; $KFORGE_CXX, when set, replaces options.gxx.
  ToolchainCompiler(ToolchainOptions options, ToolchainLookup toolchains);
  Artifact compile(const CompileJob& job) override;
  std::string toolchain(const std::string& backend) override;

  /// The full compiler command for `job` writing `output` (the pinned flags), for logs and tests.
  std::vector<std::string> command(const CompileJob& job, const std::string& source_path,
                                   const std::string& output) ;

 private:
  /// A Python candidate (job.source_name ending in ".py", worker/candidate_router.h): no
  /// compiler runs here. Its source is written to <cache_dir>/<key>.py, keyed by its content, and
  /// that file is the artifact; the candidate worker's import is its build (syntax errors,
  /// absent modules and load_inline/Triton failures are the load's compile_error, and
  /// load_inline's own cache, keyed by the source's hash, keeps its builds).
  Artifact stage_python(const CompileJob& job);
  std::string compiler_path(const std::string& backend);
  /// SHA-256 over the names and contents of the files under <include dir>/kforge/ (the ABI),
  /// <include dir>/common/ and <include dir>/<name>/common/ (the kernel libraries of
  /// kernels/: common/dltensor.h, cuda/common/elem.cuh, cpu/common/vmath.h, ...), for every
  /// include dir, computed once: built-in kernels are a few lines around these headers, so a
  /// header edit must change the artifact key even though the candidate's source text does not.
  /// A shared kernel header outside such a folder would not be covered
  /// (tests/kernel_library_test.cpp checks that none is).
  std::string headers_digest();

  ToolchainOptions options_;
  ToolchainLookup toolchains_;
  std::mutex mutex_;                 // guards the caches below
  std::map<std::string, std::string> paths_;     // backend -> located compiler program
  std::map<std::string, std::string> versions_;  // backend -> "g++ 12.2.0"
  std::string headers_digest_;       // guarded by mutex_; empty until first computed
};

}  // namespace kforge::compile
