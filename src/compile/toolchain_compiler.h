// Real compilers: g++ for `cpu`, nvcc for `cuda`, run as subprocesses with a timeout, with a
// content-addressed artifact cache on disk (checked before compiling, as Kernel Tuner does).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "compile/compiler.h"

namespace kforge::compile {

struct ToolchainOptions {
  std::string cache_dir;             // artifacts: <cache_dir>/<key>.so and <key>.log
  /// -I directories: the ABI (kforge/kernel.h), the kernel libraries and dlpack/dlpack.h
  /// (kernel_include_dirs() in paths.h).
  std::vector<std::string> include_dirs;
  std::string cuda_arch = "sm_90";   // nvcc -arch
  double timeout_s = 120.0;          // per compiler run; a hang is a compile_error
  std::string gxx = "g++";           // overridable: $KFORGE_CXX
  std::string nvcc;                  // empty: $KFORGE_NVCC, else PATH, else $CUDA_HOME/bin/nvcc
};

class ToolchainCompiler : public Compiler {
 public:
  explicit ToolchainCompiler(ToolchainOptions options);
  Artifact compile(const CompileJob& job) override;
  std::string toolchain(const std::string& backend) override;

  /// The full compiler command for `job` writing `output` (the pinned flags), for logs and tests.
  std::vector<std::string> command(const CompileJob& job, const std::string& source_path,
                                   const std::string& output) ;

 private:
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
  std::mutex mutex_;                 // guards the version cache below
  std::string gxx_version_;
  std::string nvcc_version_;
  std::string nvcc_path_;
  std::string headers_digest_;       // guarded by mutex_; empty until first computed
};

/// Looks `program` up on PATH; empty if not found.
std::string find_on_path(const std::string& program);

}  // namespace kforge::compile
