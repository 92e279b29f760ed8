// Choosing the backend and the candidate workers' devices of `kforge optimize`
// (optimize_command.h). Split from optimize_command.cpp, which sets the run up.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "cli/commands.h"
#include "cli/optimize_command.h"
#include "common/error.h"
#include "common/paths.h"
#include "worker/worker_client.h"

namespace kforge::cli {

std::string resolve_backend(const std::string& requested, int device, std::string* why) {
  if (requested != "auto") {
    if (const backends::Backend* found = backends::find_backend(requested)) return found->name;
    for (const auto& [absent, reason] : backends::absent_backends()) {
      if (absent == requested) return backends::get_backend(requested).name;  // throws: why
    }
    throw Error("unknown backend '" + requested + "' (expected auto, " +
                backends::backend_names() + ")");
  }
  std::string reasons;
  for (const auto& [absent, reason] : backends::absent_backends()) {
    reasons += (reasons.empty() ? "" : "; ") + ("the " + absent + " backend is not in this build: ") + reason;
  }
  for (const backends::Backend* backend : backends::all_backends()) {
    if (!backend->can.probed_by_auto) {
      if (why != nullptr) *why = reasons;
      return backend->name;  // the fallback, always there
    }
    // The orchestrator never creates a device context itself: a worker answers for the device.
    try {
      worker::ProcessWorker probe(worker_binary_path(), backend->name, device);
      probe.device_info();  // throws when no device answers
      probe.shutdown();
      return backend->name;
    } catch (const std::exception& e) {
      // The worker's own last line says why ("no CUDA device: ..."); keep just that.
      std::string message = e.what();
      while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
      auto last = message.rfind("error: ");
      reasons += (reasons.empty() ? "" : "; ") + ("no usable " + backend->name + " device (") +
                 (last == std::string::npos ? message : message.substr(last + 7)) + ")";
    }
  }
  throw Error("--backend auto: no backend answered (" + reasons + ")");
}

std::string backends_that_can(bool backends::Capabilities::*flag, const std::string& kind) {
  const std::string names = backends::backends_that(flag);
  if (!names.empty()) return "the " + names + " backend";
  std::string why;
  for (const auto& [absent, reason] : backends::absent_backends()) {
    why += (why.empty() ? "" : "; ") + absent + ": " + reason;
  }
  return "a backend " + kind + ", and this build has none" + (why.empty() ? "" : " (" + why + ")");
}

std::vector<int> candidate_devices(const OptimizeCommandOptions& options,
                                   const std::string& backend) {
  const backends::Backend& table = backends::get_backend(backend);
  if (!options.devices.empty() && !table.can.several_devices) {
    throw Error("--devices applies to " +
                backends_that_can(&backends::Capabilities::several_devices,
                                  "with several devices") +
                " (this run uses " + backend + ")" +
                (table.can.several_workers
                     ? "; on " + backend + " use --workers N for N candidate worker processes"
                     : ""));
  }
  if (options.workers > 1 && !table.can.several_workers) {
    throw Error("--workers applies to " +
                backends_that_can(&backends::Capabilities::several_workers,
                                  "with several workers per device") +
                (table.can.several_devices ? "; on " + backend + " list the devices: --devices 0,1"
                                           : ""));
  }
  if (options.devices.empty()) return std::vector<int>(static_cast<size_t>(options.workers),
                                                       options.device);
  std::set<int> seen;
  for (int device : options.devices) {
    if (!seen.insert(device).second) {
      throw Error(fmt::format("--devices {}: device {} is listed twice (one worker per device, so "
                              "that each timing has its device to itself)",
                              fmt::join(options.devices, ","), device));
    }
  }
  return options.devices;
}

}  // namespace kforge::cli
