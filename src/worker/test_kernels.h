// Test helpers for the worker tests: compile small candidate kernels into shared objects at test
// time (g++ for cpu, nvcc for cuda), find the kforge-worker binary, and describe the tiny task the
// kernels implement (y = 2 * x over one symbolic dimension n).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "common/paths.h"
#include "process/subprocess.h"
#include "core/task.h"

namespace kforge::worker::testing {

/// Root holding include/kforge/kernel.h: KFORGE_SOURCE_DIR (CMake), else found upward from the
/// current directory (the tree may have been copied elsewhere, e.g. to a GPU machine).
inline std::string source_root() {
  namespace fs = std::filesystem;
  auto holds_header = [](const fs::path& root) {
    return fs::exists(root / "include" / "kforge" / "kernel.h");
  };
#ifdef KFORGE_SOURCE_DIR
  if (holds_header(KFORGE_SOURCE_DIR)) return KFORGE_SOURCE_DIR;
#endif
  for (fs::path dir = fs::current_path(); !dir.empty(); dir = dir.parent_path()) {
    if (holds_header(dir)) return dir.string();
    if (dir == dir.parent_path()) break;
  }
  return "../..";
}

/// The kforge-worker binary: $KFORGE_WORKER, else KFORGE_WORKER_PATH (CMake), else ./kforge-worker.
inline std::string worker_path() {
  if (const char* path = std::getenv("KFORGE_WORKER"); path && *path) return path;
#ifdef KFORGE_WORKER_PATH
  return KFORGE_WORKER_PATH;
#else
  return "./kforge-worker";
#endif
}

inline std::string nvcc_path() {
#ifdef KFORGE_CUDA_HOME
  const std::string home = KFORGE_CUDA_HOME;
#else
  const std::string home = "/usr/local/cuda";
#endif
  return std::filesystem::exists(home + "/bin/nvcc") ? home + "/bin/nvcc" : "nvcc";
}

/// A scratch directory for this test process, removed when it exits.
inline const std::string& scratch_dir() {
  struct Scratch {
    std::string path;
    Scratch() {
      std::string pattern =
          (std::filesystem::temp_directory_path() / "kforge-test-XXXXXX").string();
      if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
      path = pattern;
    }
    ~Scratch() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static Scratch scratch;
  return scratch.path;
}

/// Compiles `source` into <scratch>/<name>.so once per process and returns its path.
/// `compiler` is the argv prefix up to the flags; fails the current test on a compile error.
inline std::string build_shared_object(const std::string& name, const std::string& source,
                                       const std::string& extension,
                                       const std::vector<std::string>& compiler) {
  static std::map<std::string, std::string> built;
  if (auto found = built.find(name); found != built.end()) return found->second;
  const std::string source_path = scratch_dir() + "/" + name + extension;
  const std::string library_path = scratch_dir() + "/" + name + ".so";
  std::ofstream(source_path) << source;
  std::vector<std::string> argv = compiler;
  for (const std::string& dir : kernel_include_dirs()) argv.push_back("-I" + dir);
  argv.insert(argv.end(), {"-o", library_path, source_path});
  const process::CommandResult result = process::run_command(argv, 300);
  if (!result.succeeded()) {
    ADD_FAILURE() << "building " << name << " failed:\n" << result.output;
    return "";
  }
  built[name] = library_path;
  return library_path;
}

inline std::string build_cpu_kernel(const std::string& name, const std::string& source) {
  return build_shared_object(name, source, ".cpp",
                             {"g++", "-std=c++17", "-O1", "-shared", "-fPIC"});
}

inline std::string build_cuda_kernel(const std::string& name, const std::string& source) {
  return build_shared_object(name, source, ".cu",
                             {nvcc_path(), "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC"});
}

/// A kforge_run whose loop body is `body`, over float x (input 0) and y (output 0), n elements.
inline std::string cpu_unary_kernel(const std::string& body, const std::string& prelude = "") {
  return "#include <kforge/kernel.h>\n" + prelude +
         "\nKFORGE_API int kforge_run(const kforge_args* args) {\n"
         "  const float* x = (const float*)args->inputs[0].data;\n"
         "  float* y = (float*)args->outputs[0].data;\n"
         "  const int64_t n = kforge_numel(&args->inputs[0]);\n"
         "  (void)x; (void)y; (void)n;\n" +
         body + "\n  return 0;\n}\n";
}

/// x[n] (f32) -> y[n] (f32), no scalars.
inline Signature unary_signature(DType dtype = DType::f32) {
  Signature signature;
  signature.tensors.push_back(TensorSpec{"x", TensorRole::input, dtype, {"n"}});
  signature.tensors.push_back(TensorSpec{"y", TensorRole::output, dtype, {"n"}});
  return signature;
}

inline Workload workload_n(const std::string& name, int64_t n) {
  Workload workload;
  workload.name = name;
  workload.dims = {{"n", n}};
  return workload;
}

}  // namespace kforge::worker::testing
