// The toolchain seam: how one backend's sources become a shared object. ToolchainCompiler
// (toolchain_compiler.h) owns the mechanism every backend shares (the content-addressed artifact
// cache, the subprocess with its timeout, the -I/-D/-o arguments); a Toolchain supplies what
// differs per backend: which program, its pinned flags, its source extension. Each backend's
// folder implements one (src/backends/cpu: g++, src/backends/cuda: nvcc).
#pragma once

#include <string>
#include <vector>

namespace kforge::compile {

/// Settings of a compiler, shared by every toolchain (each reads the fields it needs).
struct ToolchainOptions {
  std::string cache_dir;             // artifacts: <cache_dir>/<key>.so and <key>.log
  /// -I directories: the ABI (kforge/kernel.h), the kernel libraries and dlpack/dlpack.h
  /// (kernel_include_dirs() in paths.h).
  std::vector<std::string> include_dirs;
  /// nvcc target: "sm_90" builds with -arch=sm_90 (Hopper machine code and compute_90 PTX); an
  /// architecture-specific target such as "sm_90a" (wgmma) with -gencode=arch=compute_90a,
  /// code=sm_90a, which runs on that architecture only.
  std::string cuda_arch = "sm_90";
  double timeout_s = 120.0;          // per compiler run; a hang is a compile_error
  std::string gxx = "g++";           // overridable: $KFORGE_CXX
  std::string nvcc;                  // empty: $KFORGE_NVCC, else PATH, else $CUDA_HOME/bin/nvcc
};

class Toolchain {
 public:
  virtual ~Toolchain() = default;
  /// The compiler's name in provenance lines and version strings: "g++", "nvcc".
  virtual std::string label() const = 0;
  /// The extension the compiler expects of a source file: ".cpp", ".cu".
  virtual std::string source_extension() const = 0;
  /// The compiler program as a path that exists and is executable. Throws Error saying what to
  /// install or which setting (environment variable, option) points at it when it is absent.
  virtual std::string locate(const ToolchainOptions& options) const = 0;
  /// The pinned flags that follow the program and precede -I, -D, the source and -o: they build
  /// a shared object exporting kforge_run with hidden visibility for everything else.
  virtual std::vector<std::string> flags(const ToolchainOptions& options) const = 0;
};

}  // namespace kforge::compile
