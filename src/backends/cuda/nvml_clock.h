// SM clock and throttle reasons of one GPU through NVML, loaded at run time (dlopen of the
// driver's libnvidia-ml.so.1), so the worker neither links nor needs NVML: where it is missing,
// readings are simply not available.
#pragma once

#include <optional>
#include <string>

namespace kforge::worker {

class NvmlClock {
 public:
  /// The GPU with PCI bus id `pci_bus_id` ("0000:3B:00.0", from cudaDeviceGetPCIBusId; NVML's
  /// device order may differ from CUDA's). Never throws: an unavailable NVML makes read() empty.
  explicit NvmlClock(const std::string& pci_bus_id);
  ~NvmlClock();
  NvmlClock(const NvmlClock&) = delete;
  NvmlClock& operator=(const NvmlClock&) = delete;

  struct Reading {
    int sm_clock_mhz = 0;
    /// A slowdown that makes timings unrepresentative is active: hardware slowdown, software
    /// or hardware thermal slowdown, or power brake (NVML clocks-event reasons 0x8, 0x20, 0x40,
    /// 0x80). A software power cap alone is not counted: it is the normal state under load.
    bool throttled = false;
  };
  /// The SM clock now and whether a slowdown is active; nullopt if NVML is unavailable.
  std::optional<Reading> read() const;

 private:
  void* library_ = nullptr;
  void* device_ = nullptr;
  void* get_clock_ = nullptr;
  void* get_reasons_ = nullptr;
};

}  // namespace kforge::worker
