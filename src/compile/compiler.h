// The compile seam: turns a candidate's source into a shared object the worker can load.
//
// `ToolchainCompiler` (toolchain_compiler.h) runs g++ or nvcc as subprocesses with pinned flags
// and a content-addressed artifact cache; tests hand the search a fake. A compile error is a
// value (verdict compile_error with the log), never an exception; a missing compiler is an Error.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/verdict.h"

namespace kforge::compile {

/// One thing to build. `defines` become -DKEY=VALUE (the template parameters).
struct CompileJob {
  std::string backend;                       // "cpu" | "cuda"
  std::string source;                        // full source text
  std::string source_name;                   // for messages, e.g. "warp_per_row.cu"
  std::map<std::string, std::string> defines;
  /// cuda: the nvcc target this source needs when it is not the toolchain's (ToolchainOptions::
  /// cuda_arch), e.g. "sm_90a" for Hopper's wgmma and setmaxnreg (family.toml `cuda_arch`);
  /// empty for the toolchain's own. Part of the artifact key through the command line.
  std::string cuda_arch;
};

/// The architecture-specific nvcc target a standalone kernel source declares on a line of its
/// own, "// kforge: nvcc target sm_90a ..." (TemplatesGenerator::standalone_source writes it for
/// a variant with family.toml `cuda_arch`), or "" when it declares none. So best.cu builds the
/// same way wherever it goes: kforge eval, kforge verify, solution.py.
std::string declared_cuda_arch(std::string_view source);

/// The result of one build.
struct Artifact {
  Verdict verdict = Verdict::ok;   // ok or compile_error
  std::string key;                 // hex hash of source + defines + flags + toolchain version
  std::string path;                // the shared object (valid when verdict is ok)
  std::string log;                 // compiler output (warnings or errors)
  bool from_cache = false;
  double compile_s = 0.0;          // wall time of the compiler run (0 on a cache hit)
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  /// Builds `job` (or returns the cached artifact). Thread-safe: the compile pool calls it from
  /// several threads at once.
  virtual Artifact compile(const CompileJob& job) = 0;
  /// "g++ 12.2.0" / "nvcc 13.0.88" for `backend`, for provenance. Throws Error if absent.
  virtual std::string toolchain(const std::string& backend) = 0;
};

}  // namespace kforge::compile
