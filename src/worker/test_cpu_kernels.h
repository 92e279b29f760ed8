// Test support shared by the worker's in-process tests (kernel_runner_test.cpp,
// provided_inputs_test.cpp): unary cpu kernels built at test time and loaded into the test
// process, and the floats an output file holds.
#pragma once

#include <dlfcn.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/mapped_file.h"
#include "worker/kernel_runner.h"
#include "worker/test_kernels.h"

namespace kforge::worker::testing {

/// kforge_run of the cpu kernel `cpu_unary_kernel(body, prelude)` (x -> y over n floats), built
/// as `name` and loaded for the rest of the test process. Throws Error when it cannot load.
inline KernelEntry load_cpu_unary_kernel(const std::string& name, const std::string& body,
                                         const std::string& prelude = "") {
  const std::string path = build_cpu_kernel(name, cpu_unary_kernel(body, prelude));
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) throw Error(dlerror());
  return reinterpret_cast<KernelEntry>(dlsym(library, "kforge_run"));
}

/// The floats of a raw little-endian file (a run's output file).
inline std::vector<float> file_floats(const std::string& path) {
  MappedFile file(path, MappedFile::Mode::read);
  std::vector<float> values(static_cast<size_t>(file.size()) / sizeof(float));
  std::memcpy(values.data(), file.data(), values.size() * sizeof(float));
  return values;
}

}  // namespace kforge::worker::testing
