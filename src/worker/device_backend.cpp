#include "worker/device_backend.h"

namespace kforge::worker {

std::unique_ptr<DeviceBackend> make_backend(const std::string& name, int device_index) {
  if (name == "cpu") return make_cpu_backend(device_index);
  if (name == "cuda") return make_cuda_backend(device_index);
  throw Error("unknown worker backend '" + name + "' (expected cpu or cuda)");
}

}  // namespace kforge::worker
