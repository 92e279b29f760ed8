#include "backends/cpu/cpu.h"

#include "common/error.h"
#include "common/files.h"

namespace kforge::backends {
namespace {

// g++ with pinned flags. -march=native: candidates are built and timed on the same machine.
class GxxToolchain final : public compile::Toolchain {
 public:
  std::string label() const override { return "g++"; }
  std::string source_extension() const override { return ".cpp"; }
  std::string locate(const compile::ToolchainOptions& options) const override {
    std::string found = find_on_path(options.gxx);
    if (found.empty()) {
      throw Error("C++ compiler '" + options.gxx +
                  "' not found on PATH (needed by the cpu backend; install g++ or set KFORGE_CXX)");
    }
    return found;
  }
  std::vector<std::string> flags(const compile::ToolchainOptions& /*options*/) const override {
    return {"-std=c++20", "-O3",     "-march=native",       "-fopenmp",
            "-shared",    "-fPIC",   "-fvisibility=hidden"};
  }
};

Backend make_table() {
  static const GxxToolchain toolchain;
  Backend backend;
  backend.name = "cpu";
  backend.language = "C++";
  backend.source_extension = ".cpp";
  backend.fence_languages = {"", "c", "cpp", "c++", "cxx", "cc", "h", "hpp"};
  backend.prompt = {
      "C++20 (g++ -O3 -march=native -fopenmp)", "cpp", "", "C++ kernels",
      "- This run is on the CPU: tensors live in host memory and there is no CUDA. Write the "
      "kernels in C++ and build them at import with `torch.utils.cpp_extension.load_inline("
      "name=..., cpp_sources=..., functions=[...])`, without `cuda_sources`.\n"
      "- OpenMP is allowed: `extra_cflags=[\"-O3\", \"-march=native\", \"-fopenmp\"]`, "
      "`extra_ldflags=[\"-fopenmp\"]`; no threads of your own."};
  backend.auto_includes = {
      {"immintrin.h", {"_mm256_", "_mm512_", "_mm_", "__m256", "__m512", "__m128"}}};
  backend.unscreened = {PolicyCategory::default_stream_launch};
  backend.toolchain = &toolchain;
  backend.make_device = &make_cpu_device;
  backend.can.several_workers = true;
  return backend;
}

}  // namespace

const Backend& cpu_backend() {
  static const Backend backend = make_table();
  return backend;
}

}  // namespace kforge::backends
