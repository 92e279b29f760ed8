// The `cpu` backend: C++20 kernels built by g++ with OpenMP, run on the host by the worker's
// thread (device.cpp). The fallback of `--backend auto`, always in the build.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "worker/device_backend.h"

namespace kforge::backends {

/// The cpu backend's table (registry.cpp lists it).
const Backend& cpu_backend();

/// The host as a DeviceBackend (device.cpp); `device_index` only labels it.
std::unique_ptr<worker::DeviceBackend> make_cpu_device(int device_index);

}  // namespace kforge::backends
