// The backend registry: the one place that lists every backend (after ggml-backend-reg.cpp).
// Adding a backend is a folder under src/backends/ and one line here.
#include <algorithm>
#include <utility>

#include "backends/backend.h"
#include "backends/cpu/cpu.h"
#include "common/error.h"
#if KFORGE_WITH_CUDA
#include "backends/cuda/cuda.h"
#endif

#ifndef KFORGE_CUDA_ABSENT_REASON
#define KFORGE_CUDA_ABSENT_REASON "kforge was built without the CUDA toolkit"
#endif

namespace kforge::backends {

const std::vector<const Backend*>& all_backends() {
  // `--backend auto` order: probed backends first, the fallback (cpu) last.
  static const std::vector<const Backend*> backends = {
#if KFORGE_WITH_CUDA
      &cuda_backend(),
#endif
      &cpu_backend(),
  };
  return backends;
}

const std::vector<std::pair<std::string, std::string>>& absent_backends() {
  static const std::vector<std::pair<std::string, std::string>> absent = {
#if !KFORGE_WITH_CUDA
      {"cuda", KFORGE_CUDA_ABSENT_REASON},
#endif
  };
  return absent;
}

bool Backend::screens(PolicyCategory category) const {
  return std::find(unscreened.begin(), unscreened.end(), category) == unscreened.end();
}

const Backend* find_backend(std::string_view name) {
  for (const Backend* backend : all_backends()) {
    if (backend->name == name) return backend;
  }
  return nullptr;
}

std::string name_list(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return text;
}

std::string backend_names() {
  std::vector<std::string> names;
  for (const Backend* backend : all_backends()) names.push_back(backend->name);
  return name_list(std::move(names));
}

std::vector<std::string> known_backend_names() {
  std::vector<std::string> names;
  for (const Backend* backend : all_backends()) names.push_back(backend->name);
  for (const auto& [absent, why] : absent_backends()) names.push_back(absent);
  std::sort(names.begin(), names.end());
  return names;
}

std::string backends_that(bool Capabilities::*flag) {
  std::vector<std::string> names;
  for (const Backend* backend : all_backends()) {
    if (backend->can.*flag) names.push_back(backend->name);
  }
  return name_list(std::move(names));
}

const Backend& get_backend(std::string_view name) {
  if (const Backend* backend = find_backend(name)) return *backend;
  for (const auto& [absent, why] : absent_backends()) {
    if (absent == name) {
      throw Error("the " + absent + " backend is not in this build: " + why);
    }
  }
  throw Error("unknown backend '" + std::string(name) + "' (expected " + backend_names() + ")");
}

const compile::Toolchain& toolchain_for(const std::string& backend) {
  return *get_backend(backend).toolchain;
}

std::unique_ptr<compile::ToolchainCompiler> make_compiler(compile::ToolchainOptions options) {
  return std::make_unique<compile::ToolchainCompiler>(std::move(options), &toolchain_for);
}

std::unique_ptr<worker::DeviceBackend> make_device_backend(std::string_view name,
                                                           int device_index) {
  return get_backend(name).make_device(device_index);
}

}  // namespace kforge::backends
