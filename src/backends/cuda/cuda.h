// The `cuda` backend: CUDA C++ kernels built by nvcc for one architecture (-arch, sm_90 by
// default), run on one GPU per worker through the CUDA runtime (device.cpp), with the work
// audit (cupti_audit.h), in-place input generation (cuda_inputs.h) and NVML clocks. Built only
// when CMake finds the CUDA toolkit (KFORGE_CUDA, CMakeLists.txt).
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "worker/device_backend.h"

namespace kforge::backends {

/// nvcc's target flag for `arch`: "-arch=sm_90" for a plain target (its machine code and PTX, so
/// a newer GPU can still JIT it); "-gencode=arch=compute_90a,code=sm_90a" for an
/// architecture-specific one ending in "a" (wgmma, setmaxnreg: machine code for that
/// architecture only; nvcc 13.0's -arch=sm_90a shorthand also runs a plain sm_90 pass that
/// rejects those instructions). Throws Error unless `arch` is "sm_" followed by digits and an
/// optional "a".
std::string nvcc_arch_flag(const std::string& arch);

/// The cuda backend's table (registry.cpp lists it when the build has it).
const Backend& cuda_backend();

/// GPU `device_index` as a DeviceBackend (device.cpp). Throws Error "no CUDA device: <reason>"
/// when there is no usable device (no driver, no GPU, the index out of range).
std::unique_ptr<worker::DeviceBackend> make_cuda_device(int device_index);

}  // namespace kforge::backends
