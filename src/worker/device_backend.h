// The device seam of the worker: the few operations the check and timing code needs from a
// device, behind one small interface (after ggml's backend table). Each backend's folder
// implements it and its table (src/backends/backend.h) says how to make one: `cpu` runs kernels
// on host memory (src/backends/cpu/device.cpp); `cuda` on one GPU through the CUDA runtime, on a
// stream of the worker's own, a blocking one, so that work a careless kernel puts on the legacy
// default stream is ordered with it (src/backends/cuda/device.cpp).
//
// Every operation that fails throws DeviceError. A sticky error (the CUDA context is corrupted,
// e.g. by an illegal address) marks the backend lost: every later call fails too, and the worker
// must exit after replying so that its client respawns it.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/error.h"
#include "worker/input_generator.h"
#include "worker/protocol.h"

namespace kforge::worker {

/// A failed device operation; `sticky()` when the device cannot be used any more by this process.
class DeviceError : public Error {
 public:
  DeviceError(const std::string& message, bool sticky) : Error(message), sticky_(sticky) {}
  bool sticky() const { return sticky_; }

 private:
  bool sticky_;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  /// What hello reports: name, compute capability, SMs or threads, cache and memory sizes.
  virtual DeviceInfo info() const = 0;
  /// DLPack device of every tensor this backend allocates.
  virtual DLDevice dl_device() const = 0;
  /// What kernels get as `kforge_args::stream`: the worker's cudaStream_t, or nullptr on cpu.
  virtual void* stream() const = 0;

  /// Device memory of `bytes` bytes (> 0), aligned to at least 256 bytes.
  virtual void* allocate(int64_t bytes) = 0;
  /// Frees what allocate returned; never throws (errors are ignored, the device may be lost).
  virtual void release(void* data) noexcept = 0;
  /// Blocking copies of `bytes` bytes between host memory and device memory.
  virtual void copy_to_device(void* device_dst, const void* host_src, int64_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* device_src, int64_t bytes) = 0;
  /// Reads `bytes` bytes of device memory back in order, handing each piece to `consume(data,
  /// offset, size)` on this thread: on cuda through pinned staging buffers (pageable copies of
  /// gigabytes run at a few GB/s), on cpu as one piece in place. For read-backs that go on to a
  /// file or a comparison, so that no full-size host copy is made.
  using ChunkConsumer = std::function<void(const std::byte* data, int64_t offset, int64_t size)>;
  virtual void read_back(const void* device_src, int64_t bytes, const ChunkConsumer& consume) {
    consume(static_cast<const std::byte*>(device_src), 0, bytes);
  }
  /// Sets `bytes` bytes to `value` (0xFF poisons floating types as NaN), ordered on the stream.
  virtual void fill_bytes(void* device_dst, uint8_t value, int64_t bytes) = 0;
  /// Waits until the device is idle (all streams, so that work a kernel wrongly put on another
  /// stream has finished too) and reports any error a kernel raised, at launch or while running,
  /// as DeviceError.
  virtual void synchronize() = 0;
  /// Evicts the last-level cache by writing a buffer of twice its size, on the stream, so that
  /// the next timed call starts cold.
  virtual void flush_l2() = 0;
  /// How long the last flush_l2 took, in ms, once the stop_timer_ms that follows it returned:
  /// device time between the flush's start and start_timer on cuda, the memset's duration on
  /// cpu. Lets the host clock around a flushed call be compared with the device time alone.
  virtual double last_flush_ms() const { return 0.0; }
  /// Times one call: start_timer, the call, stop_timer_ms -> elapsed milliseconds. On cuda these
  /// are events on the stream (device time); on cpu a steady clock.
  virtual void start_timer() = 0;
  virtual double stop_timer_ms() = 0;

  /// The work audit: whether a call put work anywhere but stream(). begin_work_audit opens a
  /// window in which every kernel, memcpy and memset the process launches is recorded with its
  /// stream, whatever stream and however it was created; end_work_audit closes it and returns
  /// "" or what ran elsewhere ("2 kernels ('k(float*)') on stream 14"). kforge's own work on
  /// stream() inside the window (poison memsets, the L2 flush, input generation) is not a
  /// finding. Call both with the device idle (after synchronize): begin before the call, end
  /// after the call and its synchronize. begin returns false when there is no audit (cpu; cuda
  /// without CUPTI or under a profiler that holds it: reported once on stderr), and end then
  /// returns "". cuda: CUPTI's activity kinds are enabled for the window only, then a forced
  /// flush (not measured here; GpuWorkAudit.* prints the cost per window): it may be called per
  /// timed call, with begin and end outside the timed bracket. end throws Error when the records cannot be read or some
  /// were dropped; begin throws Error when a window is already open.
  virtual bool begin_work_audit() { return false; }
  virtual std::string end_work_audit() { return ""; }

  /// Drops the lines a kernel marked persisting in L2 (cuda: cudaCtxResetPersistingL2Cache) and
  /// the persisting-L2 limit, so that one candidate's access-policy settings cannot speed up the
  /// next call or another candidate; a no-op on cpu.
  virtual void reset_persisting_l2() {}
  /// Copy bandwidth in bytes per second (bytes read + bytes written) of a large copy within
  /// device memory, measured now (takes a few hundred ms); 0 if it cannot be measured.
  virtual double measure_copy_bytes_per_s() = 0;
  /// Arithmetic rates in FLOP/s measured now (a few tens of ms), by dtype name; empty when the
  /// backend has no probe. See DeviceInfo::measured_flops_per_s.
  virtual std::map<std::string, double> measure_flops_per_s() { return {}; }
  /// SM clock and throttle state now, when the device can tell (cuda through NVML).
  struct ClockReading {
    int sm_clock_mhz = 0;
    bool throttled = false;  // a thermal, power-brake or hardware slowdown is active
  };
  virtual std::optional<ClockReading> read_clock() { return std::nullopt; }
  /// Writes the generated inputs `tensor` describes into `device` (its storage_elements elements)
  /// in place, the same bytes fill_input makes on the host (input_generator.h), and returns true;
  /// false when this backend cannot, and the caller generates on the host and uploads. A backend
  /// that returns true here must also implement find_input_change.
  virtual bool generate_input(void* /*device*/, const generator::GeneratedTensor& /*tensor*/) {
    return false;
  }
  /// The first storage element of `device` that differs from what generate_input writes for
  /// `tensor`, or -1 when none does (a kernel left its input alone).
  virtual int64_t find_input_change(const void* /*device*/,
                                    const generator::GeneratedTensor& /*tensor*/) {
    throw Error("this backend does not generate inputs in place");
  }
  /// A 64-bit hash of `bytes` bytes of device memory computed on the device (cuda_inputs.h),
  /// or nullopt when the backend has none (then the caller reads the bytes back).
  virtual std::optional<uint64_t> content_hash(const void* /*device*/, int64_t /*bytes*/) {
    return std::nullopt;
  }
  /// Bytes that may still be allocated (free device memory, or available RAM on cpu).
  virtual int64_t free_memory_bytes() const = 0;

  /// True after a sticky error: the worker must exit after its reply.
  virtual bool device_lost() const = 0;
  /// Bytes currently allocated through allocate() and not released (leak checks).
  virtual int64_t live_bytes() const = 0;
};

/// Owns one allocation of a backend; released on destruction. With `guard_bytes` > 0 the
/// allocation is `guard_bytes` + `bytes` + `guard_bytes`: data() points past the first band,
/// band_before() and band_after() at the bands either side of the `bytes` usable bytes (what
/// guard_bands.h fills and checks). `guard_bytes` must be a multiple of 256, so that data()
/// keeps the 256-byte alignment allocate() promises; otherwise Error.
class DeviceBuffer {
 public:
  DeviceBuffer(DeviceBackend& backend, int64_t bytes, int64_t guard_bytes = 0)
      : backend_(&backend),
        base_(allocate(backend, bytes, guard_bytes)),
        bytes_(bytes),
        guard_bytes_(guard_bytes) {}
  ~DeviceBuffer() {
    if (base_) backend_->release(base_);
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : backend_(other.backend_),
        base_(other.base_),
        bytes_(other.bytes_),
        guard_bytes_(other.guard_bytes_) {
    other.base_ = nullptr;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;

  void* data() const { return base_ ? offset(guard_bytes_) : nullptr; }
  int64_t bytes() const { return bytes_; }
  /// Bytes of each guard band (0: none).
  int64_t guard_bytes() const { return guard_bytes_; }
  /// The band just before data() and the one just after its last byte.
  void* band_before() const { return base_; }
  void* band_after() const { return offset(guard_bytes_ + bytes_); }

 private:
  static void* allocate(DeviceBackend& backend, int64_t bytes, int64_t guard_bytes) {
    if (guard_bytes < 0 || guard_bytes % 256 != 0) {
      throw Error("device buffer: guard band of " + std::to_string(guard_bytes) +
                  " bytes, expected a multiple of 256");
    }
    return backend.allocate(bytes + 2 * guard_bytes);
  }
  void* offset(int64_t bytes) const { return static_cast<std::byte*>(base_) + bytes; }

  DeviceBackend* backend_;
  void* base_;  // the allocation: the first band, then the usable bytes, then the second band
  int64_t bytes_;
  int64_t guard_bytes_;
};

}  // namespace kforge::worker
