// The `cpu` backend: tensors in host memory, kernels called on the worker's thread, a steady
// clock around each call, and a cache flush that writes twice the last-level cache size.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "backends/cpu/cpu.h"
#include "common/cpus.h"
#include "worker/device_backend.h"

namespace kforge::worker {
namespace {

/// Alignment of every allocation: as cudaMalloc, so kernels may use any vector width.
constexpr size_t kAlignmentBytes = 256;
/// Cache size assumed when the system does not report one (containers often hide it).
constexpr int64_t kFallbackCacheBytes = int64_t{32} << 20;
/// Largest cache size believed: virtual machines report whole-socket or made-up L3 sizes (0.5 GB
/// seen), and a flush of twice that per sample would dominate every timing run.
constexpr int64_t kMaxCacheBytes = int64_t{128} << 20;

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "cpu";
}

int64_t last_level_cache_bytes() {
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(name);
    if (bytes > 0) return std::min<int64_t>(bytes, kMaxCacheBytes);
  }
  return kFallbackCacheBytes;
}

class CpuBackend final : public DeviceBackend {
 public:
  explicit CpuBackend(int device_index) : device_index_(device_index) {
    if (device_index != 0) {
      throw Error("cpu backend has only device 0 (asked for " + std::to_string(device_index) + ")");
    }
    cache_bytes_ = last_level_cache_bytes();
  }

  DeviceInfo info() const override {
    DeviceInfo info;
    info.backend = "cpu";
    info.device_index = device_index_;
    info.name = cpu_model_name();
    info.multiprocessor_count = usable_cpus();
    info.l2_bytes = cache_bytes_;
    info.memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
    return info;
  }

  DLDevice dl_device() const override { return DLDevice{kDLCPU, device_index_}; }
  void* stream() const override { return nullptr; }

  void* allocate(int64_t bytes) override {
    const size_t rounded =
        (static_cast<size_t>(bytes) + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes;
    void* data = std::aligned_alloc(kAlignmentBytes, rounded);
    if (data == nullptr) {
      throw DeviceError("cannot allocate " + std::to_string(bytes) + " bytes of host memory",
                        false);
    }
    live_bytes_ += bytes;
    sizes_.push_back({data, bytes});
    return data;
  }

  void release(void* data) noexcept override {
    for (size_t i = 0; i < sizes_.size(); ++i) {
      if (sizes_[i].first == data) {
        live_bytes_ -= sizes_[i].second;
        sizes_[i] = sizes_.back();
        sizes_.pop_back();
        break;
      }
    }
    std::free(data);
  }

  void copy_to_device(void* device_dst, const void* host_src, int64_t bytes) override {
    std::memcpy(device_dst, host_src, static_cast<size_t>(bytes));
  }
  void copy_to_host(void* host_dst, const void* device_src, int64_t bytes) override {
    std::memcpy(host_dst, device_src, static_cast<size_t>(bytes));
  }
  void fill_bytes(void* device_dst, uint8_t value, int64_t bytes) override {
    std::memset(device_dst, value, static_cast<size_t>(bytes));
  }
  void synchronize() override {}

  void flush_l2() override {
    // Allocated on first use: workers that only check never pay for it.
    const auto start = std::chrono::steady_clock::now();
    if (flush_buffer_.empty()) flush_buffer_.resize(static_cast<size_t>(2 * cache_bytes_));
    // A different value each time, so the writes cannot be elided or served from a clean line.
    std::memset(flush_buffer_.data(), ++flush_value_, flush_buffer_.size());
    sink_ = flush_buffer_[flush_buffer_.size() / 2];
    last_flush_ms_ = std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - start).count();
  }

  double last_flush_ms() const override { return last_flush_ms_; }

  void start_timer() override { timer_start_ = std::chrono::steady_clock::now(); }
  double stop_timer_ms() override {
    const auto elapsed = std::chrono::steady_clock::now() - timer_start_;
    return std::chrono::duration<double, std::milli>(elapsed).count();
  }

  double measure_copy_bytes_per_s() override {
    // Every hardware thread copies its own slice, as a parallel kernel would; the buffers are
    // 4x the cache (at most 256 MiB) so the copy runs from memory. Best of 2 after an untimed
    // pass.
    const int threads = usable_cpus();
    const size_t bytes =
        static_cast<size_t>(std::clamp<int64_t>(4 * cache_bytes_, 64 << 20, 256 << 20));
    std::vector<unsigned char> source(bytes, 1), target(bytes, 0);
    double best_s = 0.0;
    for (int pass = 0; pass < 3; ++pass) {
      const auto start = std::chrono::steady_clock::now();
      std::vector<std::thread> workers;
      const size_t slice = bytes / static_cast<size_t>(threads);
      for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
          const size_t begin = slice * static_cast<size_t>(t);
          const size_t end = t + 1 == threads ? bytes : begin + slice;
          std::memcpy(target.data() + begin, source.data() + begin, end - begin);
        });
      }
      for (std::thread& worker : workers) worker.join();
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (pass > 0 && (best_s == 0.0 || seconds < best_s)) best_s = seconds;
    }
    sink_ = target[bytes / 2];
    return best_s > 0.0 ? 2.0 * static_cast<double>(bytes) / best_s : 0.0;
  }

  int64_t free_memory_bytes() const override {
    return static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  }

  bool device_lost() const override { return false; }
  int64_t live_bytes() const override { return live_bytes_; }

 private:
  int device_index_;
  int64_t cache_bytes_ = 0;
  std::vector<unsigned char> flush_buffer_;
  unsigned char flush_value_ = 0;
  volatile unsigned char sink_ = 0;
  double last_flush_ms_ = 0.0;
  std::chrono::steady_clock::time_point timer_start_;
  int64_t live_bytes_ = 0;
  std::vector<std::pair<void*, int64_t>> sizes_;  // few live at once: a linear scan is enough
};

}  // namespace
}  // namespace kforge::worker

namespace kforge::backends {

std::unique_ptr<worker::DeviceBackend> make_cpu_device(int device_index) {
  return std::make_unique<worker::CpuBackend>(device_index);
}

}  // namespace kforge::backends
