#include "backends/cuda/cuda.h"

#include <cstdlib>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"

namespace kforge::backends {

std::string nvcc_arch_flag(const std::string& arch) {
  const bool specific = !arch.empty() && arch.back() == 'a';
  const std::string digits = arch.size() > 3 ? arch.substr(3, arch.size() - 3 - (specific ? 1 : 0)) : "";
  const bool valid = arch.rfind("sm_", 0) == 0 && !digits.empty() &&
                     digits.find_first_not_of("0123456789") == std::string::npos;
  if (!valid) {
    throw Error("cuda architecture '" + arch +
                "': expected sm_ followed by its compute capability, e.g. sm_90, or sm_90a for "
                "Hopper's architecture-specific instructions");
  }
  if (!specific) return "-arch=" + arch;
  return "-gencode=arch=compute_" + digits + "a,code=" + arch;
}

namespace {

// nvcc with pinned flags: -lineinfo so that Nsight Compute maps its metrics to source lines.
class NvccToolchain final : public compile::Toolchain {
 public:
  std::string label() const override { return "nvcc"; }
  std::string source_extension() const override { return ".cu"; }
  // options.nvcc, else $KFORGE_NVCC, else PATH, else $CUDA_HOME/bin/nvcc (/usr/local/cuda).
  std::string locate(const compile::ToolchainOptions& options) const override {
    std::string nvcc = options.nvcc;
    if (nvcc.empty()) {
      if (const char* env = std::getenv("KFORGE_NVCC"); env != nullptr && *env != '\0') nvcc = env;
    }
    if (nvcc.empty()) nvcc = find_on_path("nvcc");
    if (nvcc.empty()) {
      const char* home = std::getenv("CUDA_HOME");
      std::filesystem::path guess =
          std::filesystem::path(home != nullptr ? home : "/usr/local/cuda") / "bin" / "nvcc";
      if (std::filesystem::exists(guess)) nvcc = guess.string();
    }
    if (nvcc.empty() || find_on_path(nvcc).empty()) {
      throw Error("nvcc not found (needed by the cuda backend): put the CUDA toolkit's bin on "
                  "PATH, or set KFORGE_NVCC or CUDA_HOME");
    }
    return find_on_path(nvcc);
  }
  std::vector<std::string> flags(const compile::ToolchainOptions& options) const override {
    return {"-std=c++17", "-O3",    nvcc_arch_flag(options.cuda_arch),  "-lineinfo",
            "-shared",    "-Xcompiler", "-fPIC,-fvisibility=hidden"};
  }
};

Backend make_table() {
  static const NvccToolchain toolchain;
  Backend backend;
  backend.name = "cuda";
  backend.language = "CUDA";
  backend.source_extension = ".cu";
  backend.fence_languages = {"", "c", "cpp", "c++", "cxx", "cc", "h", "hpp", "cuda", "cu", "cuh"};
  backend.prompt = {"CUDA C++", "cuda",
                    "- Launch every kernel on `(cudaStream_t)args->stream`; never synchronize the "
                    "device, never create streams or events. Tensors are in device memory.",
                    "CUDA kernels",
                    "- Write the kernels in CUDA C++ and build them at import with "
                    "`torch.utils.cpp_extension.load_inline` (`cpp_sources` declaring the "
                    "functions, `cuda_sources` defining them, `functions=[...]`).\n"
                    "- Launch every kernel on PyTorch's current stream: "
                    "`kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>` (include "
                    "<ATen/cuda/CUDAContext.h>); a launch on the default stream is refused."};
  backend.auto_includes = {{"cuda_fp16.h", {"__half", "__float2half", "__half2float"}}};
  backend.toolchain = &toolchain;
  backend.make_device = &make_cuda_device;
  backend.can.probed_by_auto = true;
  backend.can.several_devices = true;
  backend.can.ncu_profiler = true;
  backend.can.physical_floor = true;
  backend.can.builds_overlap_timing = true;
  backend.can.compute_capability = true;
  backend.can.triton = true;
  return backend;
}

}  // namespace

const Backend& cuda_backend() {
  static const Backend backend = make_table();
  return backend;
}

}  // namespace kforge::backends
