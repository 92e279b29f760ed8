#include "backends/cuda/nvml_clock.h"

#include <dlfcn.h>

#include <cstdint>

namespace kforge::worker {
namespace {

// The few NVML declarations needed (its C ABI is stable; the header is not in the toolkit here).
using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = void*;
using InitFn = NvmlReturn (*)();
using HandleByPciFn = NvmlReturn (*)(const char*, NvmlDevice*);
using ClockInfoFn = NvmlReturn (*)(NvmlDevice, int, unsigned int*);
using ReasonsFn = NvmlReturn (*)(NvmlDevice, unsigned long long*);
constexpr int kNvmlClockSm = 1;
constexpr unsigned long long kSlowdownReasons = 0x8 | 0x20 | 0x40 | 0x80;

}  // namespace

NvmlClock::NvmlClock(const std::string& pci_bus_id) {
  if (pci_bus_id.empty()) return;
  library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library_) return;
  auto init = reinterpret_cast<InitFn>(dlsym(library_, "nvmlInit_v2"));
  auto by_pci = reinterpret_cast<HandleByPciFn>(dlsym(library_, "nvmlDeviceGetHandleByPciBusId_v2"));
  get_clock_ = dlsym(library_, "nvmlDeviceGetClockInfo");
  get_reasons_ = dlsym(library_, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!get_reasons_) get_reasons_ = dlsym(library_, "nvmlDeviceGetCurrentClocksThrottleReasons");
  NvmlDevice device = nullptr;
  if (!init || !by_pci || !get_clock_ || init() != 0 || by_pci(pci_bus_id.c_str(), &device) != 0) {
    device_ = nullptr;
    return;
  }
  device_ = device;
}

NvmlClock::~NvmlClock() {
  // nvmlShutdown is deliberately not called: the library stays loaded for the process's life.
}

std::optional<NvmlClock::Reading> NvmlClock::read() const {
  if (!device_) return std::nullopt;
  unsigned int mhz = 0;
  if (reinterpret_cast<ClockInfoFn>(get_clock_)(device_, kNvmlClockSm, &mhz) != 0) {
    return std::nullopt;
  }
  Reading reading;
  reading.sm_clock_mhz = static_cast<int>(mhz);
  unsigned long long reasons = 0;
  if (get_reasons_ && reinterpret_cast<ReasonsFn>(get_reasons_)(device_, &reasons) == 0) {
    reading.throttled = (reasons & kSlowdownReasons) != 0;
  }
  return reading;
}

}  // namespace kforge::worker
