// The `cuda` backend: one GPU through the CUDA runtime API, called from plain C++; the few
// kernels of its own (in-place inputs, input checks, output hashes) are in cuda_inputs.cu.
// All work goes on a stream owned by the worker, which is also what kernels receive as
// `kforge_args::stream`. It is a blocking stream (cudaStreamCreate), so work a careless kernel
// launches on the legacy default stream is ordered with it and counted by its timing events. The runtime is linked statically (libcudart_static), so the worker
// needs only the driver.
#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>
#include <algorithm>

#include "common/parallel_copy.h"
#include "backends/cuda/cuda_inputs.h"
#include "backends/cuda/cuda_probe.h"
#include "backends/cuda/cupti_audit.h"
#include "backends/cuda/cuda.h"
#include "worker/device_backend.h"
#include "backends/cuda/nvml_clock.h"

namespace kforge::worker {
namespace {

/// Errors after which the context is corrupted: every later runtime call returns them too.
constexpr std::array kStickyErrors = {
    cudaErrorIllegalAddress,
    cudaErrorLaunchFailure,
    cudaErrorMisalignedAddress,
    cudaErrorIllegalInstruction,
    cudaErrorHardwareStackError,
    cudaErrorInvalidPc,
    cudaErrorAssert,
    cudaErrorLaunchTimeout,
    cudaErrorECCUncorrectable,
    cudaErrorInvalidAddressSpace,
    cudaErrorContextIsDestroyed,
    cudaErrorUnknown,
};

bool is_sticky(cudaError_t error) {
  for (cudaError_t sticky : kStickyErrors) {
    if (error == sticky) return true;
  }
  return false;
}

std::string describe(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + " (" + cudaGetErrorString(error) + ")";
}

/// FLOP per clock per SM of the fastest unit for each dtype (dense tensor cores where they apply;
/// f32 counts TF32 tensor cores, since a kernel may use them within its tolerance), by compute
/// capability major version. Sources: NVIDIA A100 and H100 architecture whitepapers (peak
/// dense rates divided by SM count x boost clock). Unknown architectures get twice Hopper's
/// numbers: the table only has to be an upper bound.
std::map<std::string, double> flops_per_clock_per_sm(int major) {
  if (major == 8) return {{"f16", 2048}, {"bf16", 2048}, {"f32", 1024}, {"f64", 128}};
  if (major == 9) return {{"f16", 4096}, {"bf16", 4096}, {"f32", 2048}, {"f64", 512}};
  return {{"f16", 8192}, {"bf16", 8192}, {"f32", 4096}, {"f64", 1024}};
}

/// "13.0" from the runtime's encoding 1000 * major + 10 * minor.
std::string version_text(int encoded) {
  return std::to_string(encoded / 1000) + "." + std::to_string((encoded % 1000) / 10);
}

class CudaBackend final : public DeviceBackend {
 public:
  explicit CudaBackend(int device_index) : device_index_(device_index) {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess)
      throw Error(std::string("no CUDA device: ") + cudaGetErrorString(error));
    if (count == 0) throw Error("no CUDA device: the driver reports no devices");
    if (device_index < 0 || device_index >= count) {
      throw Error("no CUDA device: index " + std::to_string(device_index) + " asked, " +
                  std::to_string(count) + " present");
    }
    setup(cudaSetDevice(device_index), "cudaSetDevice");
    setup(cudaGetDeviceProperties(&properties_, device_index), "cudaGetDeviceProperties");
    setup(cudaStreamCreate(&stream_), "cudaStreamCreate");
    setup(cudaEventCreate(&start_), "cudaEventCreate");
    setup(cudaEventCreate(&stop_), "cudaEventCreate");
    setup(cudaEventCreate(&flush_start_), "cudaEventCreate");
    for (cudaEvent_t& event : staged_) {
      setup(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    }
    // Twice the L2 size: a write of that much evicts every line a previous call left behind.
    flush_bytes_ = 2 * static_cast<int64_t>(properties_.l2CacheSize);
    if (flush_bytes_ > 0) {
      setup(cudaMalloc(&flush_buffer_, static_cast<size_t>(flush_bytes_)), "cudaMalloc");
    }
  }

  ~CudaBackend() override {
    if (lost_) return;  // every call would fail; the process is about to exit anyway
    if (flush_buffer_) cudaFree(flush_buffer_);
    if (scratch_) cudaFree(scratch_);
    for (void* buffer : staging_) {
      if (buffer) cudaFreeHost(buffer);
    }
    for (cudaEvent_t event : staged_) {
      if (event) cudaEventDestroy(event);
    }
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (flush_start_) cudaEventDestroy(flush_start_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  DeviceInfo info() const override {
    DeviceInfo info;
    info.backend = "cuda";
    info.device_index = device_index_;
    info.name = properties_.name;
    info.compute_capability =
        std::to_string(properties_.major) + "." + std::to_string(properties_.minor);
    info.multiprocessor_count = properties_.multiProcessorCount;
    info.l2_bytes = properties_.l2CacheSize;
    info.memory_bytes = static_cast<int64_t>(properties_.totalGlobalMem);
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device_index_);
    info.sm_clock_mhz = clock_khz / 1000;
    for (const auto& [dtype, per_clock] : flops_per_clock_per_sm(properties_.major)) {
      info.peak_flops_per_s[dtype] =
          per_clock * properties_.multiProcessorCount * static_cast<double>(clock_khz) * 1e3;
    }
    int driver = 0;
    if (cudaDriverGetVersion(&driver) == cudaSuccess) info.driver_version = version_text(driver);
    int runtime = 0;
    if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
      info.runtime_version = version_text(runtime);
    return info;
  }

  DLDevice dl_device() const override { return DLDevice{kDLCUDA, device_index_}; }
  void* stream() const override { return stream_; }

  void* allocate(int64_t bytes) override {
    ensure_usable();
    void* data = nullptr;
    check(cudaMalloc(&data, static_cast<size_t>(bytes)), "cudaMalloc");
    live_bytes_ += bytes;
    sizes_[data] = bytes;
    return data;
  }

  void release(void* data) noexcept override {
    if (auto found = sizes_.find(data); found != sizes_.end()) {
      live_bytes_ -= found->second;
      sizes_.erase(found);
    }
    if (!lost_) cudaFree(data);
  }

  void copy_to_device(void* device_dst, const void* host_src, int64_t bytes) override {
    ensure_usable();
    if (bytes < kStagingBytes) {
      check(cudaMemcpyAsync(device_dst, host_src, static_cast<size_t>(bytes),
                            cudaMemcpyHostToDevice, stream_),
            "cudaMemcpyAsync (host to device)");
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      return;
    }
    // Large: through the two pinned buffers (pageable uploads of gigabytes run at a few GB/s);
    // piece k is copied into its buffer on several threads while piece k-1 uploads.
    ensure_staging();
    const auto* source = static_cast<const std::byte*>(host_src);
    auto* target = static_cast<std::byte*>(device_dst);
    for (int64_t offset = 0, k = 0; offset < bytes; offset += kStagingBytes, ++k) {
      const int slot = static_cast<int>(k % 2);
      const int64_t size = std::min(kStagingBytes, bytes - offset);
      check(cudaEventSynchronize(staged_[slot]), "cudaEventSynchronize");  // buffer free again
      parallel_copy(static_cast<std::byte*>(staging_[slot]), source + offset, size);
      check(cudaMemcpyAsync(target + offset, staging_[slot], static_cast<size_t>(size),
                            cudaMemcpyHostToDevice, stream_),
            "cudaMemcpyAsync (pinned host to device)");
      check(cudaEventRecord(staged_[slot], stream_), "cudaEventRecord");
    }
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  void ensure_staging() {
    for (void*& buffer : staging_) {
      if (!buffer) {
        check(cudaMallocHost(&buffer, static_cast<size_t>(kStagingBytes)), "cudaMallocHost");
      }
    }
  }

  void copy_to_host(void* host_dst, const void* device_src, int64_t bytes) override {
    ensure_usable();
    check(cudaMemcpyAsync(host_dst, device_src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost,
                          stream_),
          "cudaMemcpyAsync (device to host)");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  void read_back(const void* device_src, int64_t bytes, const ChunkConsumer& consume) override {
    ensure_usable();
    if (bytes < kStagingBytes) {  // small: one pageable copy is cheaper than staging
      std::vector<std::byte> host(static_cast<size_t>(bytes));
      copy_to_host(host.data(), device_src, bytes);
      consume(host.data(), 0, bytes);
      return;
    }
    ensure_staging();
    // Double-buffered: the copy of piece k+1 runs while piece k is consumed.
    const auto* source = static_cast<const std::byte*>(device_src);
    const int64_t pieces = (bytes + kStagingBytes - 1) / kStagingBytes;
    const auto piece_size = [&](int64_t k) { return std::min(kStagingBytes, bytes - k * kStagingBytes); };
    check(cudaMemcpyAsync(staging_[0], source, static_cast<size_t>(piece_size(0)),
                          cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (device to pinned host)");
    check(cudaEventRecord(staged_[0], stream_), "cudaEventRecord");
    for (int64_t k = 0; k < pieces; ++k) {
      const int slot = static_cast<int>(k % 2);
      if (k + 1 < pieces) {
        const int next = 1 - slot;
        check(cudaMemcpyAsync(staging_[next], source + (k + 1) * kStagingBytes,
                              static_cast<size_t>(piece_size(k + 1)), cudaMemcpyDeviceToHost,
                              stream_),
              "cudaMemcpyAsync (device to pinned host)");
        check(cudaEventRecord(staged_[next], stream_), "cudaEventRecord");
      }
      check(cudaEventSynchronize(staged_[slot]), "cudaEventSynchronize");
      consume(static_cast<const std::byte*>(staging_[slot]), k * kStagingBytes, piece_size(k));
    }
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  void fill_bytes(void* device_dst, uint8_t value, int64_t bytes) override {
    ensure_usable();
    check(cudaMemsetAsync(device_dst, value, static_cast<size_t>(bytes), stream_),
          "cudaMemsetAsync");
  }

  void synchronize() override {
    ensure_usable();
    // A launch error (bad grid, too much shared memory) is reported here, not by a sync.
    check(cudaGetLastError(), "kernel launch");
    // The whole device, not only our stream: work a kernel put on another stream must finish
    // (and fail) before its outputs are read.
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the kernel");
  }

  void flush_l2() override {
    ensure_usable();
    if (flush_bytes_ == 0) return;
    check(cudaEventRecord(flush_start_, stream_), "cudaEventRecord");
    check(
        cudaMemsetAsync(flush_buffer_, ++flush_value_, static_cast<size_t>(flush_bytes_), stream_),
        "cudaMemsetAsync (L2 flush)");
    flush_pending_ = true;
  }

  void start_timer() override {
    ensure_usable();
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
  }

  double stop_timer_ms() override {
    ensure_usable();
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float elapsed_ms = 0.0f;
    check(cudaEventElapsedTime(&elapsed_ms, start_, stop_), "cudaEventElapsedTime");
    last_flush_ms_ = 0.0;
    if (flush_pending_) {
      float flush_ms = 0.0f;
      check(cudaEventElapsedTime(&flush_ms, flush_start_, start_), "cudaEventElapsedTime");
      last_flush_ms_ = flush_ms;
      flush_pending_ = false;
    }
    return elapsed_ms;
  }

  double last_flush_ms() const override { return last_flush_ms_; }

  bool begin_work_audit() override {
    ensure_usable();
    return audit_.begin(stream_);
  }
  std::string end_work_audit() override { return audit_.end(); }

  void reset_persisting_l2() override {
    ensure_usable();
    // Not every device supports persisting L2 (then the call fails harmlessly): ignore errors.
    if (cudaCtxResetPersistingL2Cache() != cudaSuccess) cudaGetLastError();
    if (cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0) != cudaSuccess) cudaGetLastError();
  }

  std::map<std::string, double> measure_flops_per_s() override {
    ensure_usable();
    std::map<std::string, double> rates;
    for (const bool f64 : {false, true}) {
      double rate = 0.0;
      check(static_cast<cudaError_t>(cuda_probe::fma_flops_per_s(
                stream_, properties_.multiProcessorCount, f64, &rate)),
            "measuring the FMA rate");
      if (rate > 0) rates[f64 ? "f64" : "f32"] = rate;
    }
    return rates;
  }

  double measure_copy_bytes_per_s() override {
    ensure_usable();
    // 1 GiB each way (or a quarter of free memory): far beyond L2, so HBM bandwidth is measured.
    size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    const size_t bytes = std::min<size_t>(size_t{1} << 30, free_bytes / 4);
    if (bytes < (size_t{16} << 20)) return 0.0;
    void* source = allocate(static_cast<int64_t>(bytes));
    void* target = allocate(static_cast<int64_t>(bytes));
    double best_ms = 0.0;
    try {
      fill_bytes(source, 1, static_cast<int64_t>(bytes));
      for (int pass = 0; pass < 6; ++pass) {
        start_timer();
        check(cudaMemcpyAsync(target, source, bytes, cudaMemcpyDeviceToDevice, stream_),
              "cudaMemcpyAsync (device to device)");
        const double ms = stop_timer_ms();
        if (pass > 0 && (best_ms == 0.0 || ms < best_ms)) best_ms = ms;
      }
    } catch (...) {
      release(source);
      release(target);
      throw;
    }
    release(source);
    release(target);
    return best_ms > 0.0 ? 2.0 * static_cast<double>(bytes) / (best_ms * 1e-3) : 0.0;
  }

  std::optional<ClockReading> read_clock() override {
    if (!clock_) clock_.emplace(pci_bus_id());
    auto reading = clock_->read();
    if (!reading) return std::nullopt;
    return ClockReading{reading->sm_clock_mhz, reading->throttled};
  }

  bool generate_input(void* device, const generator::GeneratedTensor& tensor) override {
    ensure_usable();
    check(static_cast<cudaError_t>(cuda_inputs::generate(device, tensor, stream_)),
          "generating inputs on the device");
    return true;
  }

  int64_t find_input_change(const void* device,
                            const generator::GeneratedTensor& tensor) override {
    ensure_usable();
    int64_t first = -1;
    check(static_cast<cudaError_t>(
              cuda_inputs::first_difference(device, tensor, stream_, scratch(), &first)),
          "checking inputs on the device");
    return first;
  }

  std::optional<uint64_t> content_hash(const void* device, int64_t bytes) override {
    ensure_usable();
    uint64_t hash = 0;
    check(static_cast<cudaError_t>(
              cuda_inputs::content_hash(device, bytes, stream_, scratch(), &hash)),
          "hashing outputs on the device");
    return hash;
  }

  int64_t free_memory_bytes() const override {
    size_t free_bytes = 0, total_bytes = 0;
    if (lost_ || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return 0;
    return static_cast<int64_t>(free_bytes);
  }

  bool device_lost() const override { return lost_; }
  int64_t live_bytes() const override { return live_bytes_; }

 private:
  /// Errors while setting the device up: the device is unusable, a plain harness error.
  void setup(cudaError_t error, const char* call) {
    if (error != cudaSuccess) {
      throw Error("CUDA device " + std::to_string(device_index_) + ": " + call +
                  " failed: " + describe(error));
    }
  }

  std::string pci_bus_id() const {
    char text[64] = {};
    if (cudaDeviceGetPCIBusId(text, sizeof text, device_index_) != cudaSuccess) return "";
    return text;
  }

  /// 8 bytes of device memory for the results of cuda_inputs' reductions.
  void* scratch() {
    if (scratch_ == nullptr) check(cudaMalloc(&scratch_, 8), "cudaMalloc");
    return scratch_;
  }

  void ensure_usable() const {
    if (lost_) throw DeviceError("the CUDA context was lost after an earlier sticky error", true);
  }

  void check(cudaError_t error, const char* call) {
    if (error == cudaSuccess) return;
    cudaGetLastError();  // clears a non-sticky error so later calls start clean
    bool sticky = is_sticky(error);
    if (!sticky) {
      // An error we do not know as sticky: a corrupted context fails the next call too. Any
      // failure of the probe counts as lost; a respawn is cheaper than a wrong verdict.
      const cudaError_t probe = cudaDeviceSynchronize();
      sticky = probe != cudaSuccess;
      cudaGetLastError();
    }
    lost_ = lost_ || sticky;
    throw DeviceError(
        std::string(call) + ": " + describe(error) + (sticky ? "; the CUDA context is lost" : ""),
        sticky);
  }

  int device_index_;
  cudaDeviceProp properties_{};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  cudaEvent_t flush_start_ = nullptr;  // recorded before each flush, to time it
  bool flush_pending_ = false;
  double last_flush_ms_ = 0.0;
  void* flush_buffer_ = nullptr;
  void* scratch_ = nullptr;
  static constexpr int64_t kStagingBytes = int64_t{64} << 20;  // per pinned read-back buffer
  void* staging_[2] = {nullptr, nullptr};
  cudaEvent_t staged_[2] = {nullptr, nullptr};
  int64_t flush_bytes_ = 0;
  unsigned char flush_value_ = 0;
  bool lost_ = false;
  std::optional<NvmlClock> clock_;
  WorkAudit audit_;  // which work ran outside stream_ (cupti_audit.h)
  int64_t live_bytes_ = 0;
  std::unordered_map<void*, int64_t> sizes_;
};

}  // namespace
}  // namespace kforge::worker

namespace kforge::backends {

std::unique_ptr<worker::DeviceBackend> make_cuda_device(int device_index) {
  return std::make_unique<worker::CudaBackend>(device_index);
}

}  // namespace kforge::backends
