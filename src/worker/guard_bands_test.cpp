// Guard bands around every tensor of a TensorSet (guard_bands.h): the canary, how far a write
// into a band is measured, and the check through each backend (GuardBands on cpu; GpuGuardBands
// on cuda, skipped without a device), on compact and padded layouts.
#include "worker/guard_bands.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "worker/tensor_set.h"

namespace kforge::worker {
namespace {

TEST(GuardBands, OverrunIsMeasuredFromTheStorageEdge) {
  const std::vector<std::byte> canary = guard_canary(0, GuardSide::after);
  std::vector<std::byte> band = canary;
  EXPECT_EQ(guard_overrun(band, canary, GuardSide::after), 0);
  EXPECT_EQ(guard_overrun(band, canary, GuardSide::before), 0);
  band[0] = ~band[0];
  EXPECT_EQ(guard_overrun(band, canary, GuardSide::after), 1);  // the first byte past the end
  EXPECT_EQ(guard_overrun(band, canary, GuardSide::before), kGuardBandBytes);
  band[10] = ~band[10];
  EXPECT_EQ(guard_overrun(band, canary, GuardSide::after), 11);
  band = canary;
  band[kGuardBandBytes - 16] = ~band[kGuardBandBytes - 16];  // one float4 before the start
  EXPECT_EQ(guard_overrun(band, canary, GuardSide::before), 16);
  band.pop_back();
  EXPECT_THROW(guard_overrun(band, canary, GuardSide::after), Error);
}

TEST(GuardBands, CanariesDifferByTensorAndSideAndAreNoRepeatedByte) {
  const std::vector<std::byte> x_after = guard_canary(0, GuardSide::after);
  EXPECT_EQ(x_after.size(), static_cast<size_t>(kGuardBandBytes));
  EXPECT_EQ(x_after, guard_canary(0, GuardSide::after));  // deterministic
  EXPECT_NE(x_after, guard_canary(0, GuardSide::before));
  EXPECT_NE(x_after, guard_canary(1, GuardSide::after));
  // No f32 element of the band is 0 or the 0xFF poison.
  for (int64_t e = 0; e < kGuardBandBytes / 4; ++e) {
    uint32_t bits = 0;
    std::memcpy(&bits, x_after.data() + 4 * e, 4);
    EXPECT_NE(bits, 0u) << e;
    EXPECT_NE(bits, 0xFFFFFFFFu) << e;
  }
  int distinct = 0;
  for (size_t i = 1; i < x_after.size(); ++i) distinct += x_after[i] != x_after[0];
  EXPECT_GT(distinct, kGuardBandBytes / 2);
}

/// Writes `count` bytes at `offset` of tensor `i`'s storage (negative: before it, into its
/// first band), each the complement of what the band held, so each surely changes.
void scribble(DeviceBackend& backend, const TensorSet& set, size_t i, int64_t offset,
              int64_t count) {
  auto* at = static_cast<std::byte*>(const_cast<void*>(set.data(i))) + offset;
  std::vector<std::byte> bytes(static_cast<size_t>(count));
  backend.copy_to_host(bytes.data(), at, count);
  for (std::byte& b : bytes) b = ~b;
  backend.copy_to_device(at, bytes.data(), count);
}

Signature strided_signature() {
  Signature signature;
  signature.tensors.push_back(TensorSpec{"x", TensorRole::input, DType::f32, {"rows", "cols"}, true});
  signature.tensors.push_back(TensorSpec{"y", TensorRole::output, DType::f32, {"rows", "cols"}});
  return signature;
}

Workload rows_cols(int64_t rows, int64_t cols) {
  Workload workload;
  workload.name = "w";
  workload.dims = {{"rows", rows}, {"cols", cols}};
  return workload;
}

/// The checks every backend must pass.
void check_backend(DeviceBackend& backend) {
  for (const bool padded : {false, true}) {
    SCOPED_TRACE(padded ? "padded" : "compact");
    TensorSet set(backend, strided_signature(), rows_cols(5, 33), padded);
    for (size_t i = 0; i < set.size(); ++i) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(set.data(i)) % 256, 0u) << i;
    }
    // The harness's own writes (inputs generated or uploaded, outputs poisoned) stay inside.
    set.fill_inputs(3, InputDistribution::normal);
    set.fill_inputs(4, InputDistribution::uniform, /*allow_in_place=*/false);
    set.poison_outputs();
    backend.synchronize();
    EXPECT_EQ(set.guard_violation(), "");
    scribble(backend, set, 1, set.bytes(1), 3);
    EXPECT_EQ(set.guard_violation(), "wrote 3 bytes past output 'y'");
    scribble(backend, set, 0, -16, 16);
    EXPECT_EQ(set.guard_violation(),
              "wrote 16 bytes before input 'x'; wrote 3 bytes past output 'y'");
    set.poison_outputs();  // the bands are not refilled: the violation stays reported
    EXPECT_NE(set.guard_violation(), "");
  }
  TensorSet set(backend, strided_signature(), rows_cols(1, 1));
  scribble(backend, set, 1, set.bytes(1), kGuardBandBytes);
  scribble(backend, set, 1, -8, 4);  // 4 bytes, 8 before the start: measured from the edge
  EXPECT_EQ(set.guard_violation(),
            "wrote 8 bytes before output 'y'; wrote at least 4096 bytes past output 'y'");
}

TEST(GuardBands, CpuSetsReportWritesOutsideTheirStorage) { check_backend(*backends::make_device_backend("cpu", 0)); }

TEST(GuardBands, BandsMustKeepTheAlignment) {
  auto backend = backends::make_device_backend("cpu", 0);
  EXPECT_THROW(DeviceBuffer(*backend, 64, 100), Error);
  const DeviceBuffer buffer(*backend, 64, 512);
  EXPECT_EQ(static_cast<std::byte*>(buffer.data()) - static_cast<std::byte*>(buffer.band_before()),
            512);
  EXPECT_EQ(static_cast<std::byte*>(buffer.band_after()) - static_cast<std::byte*>(buffer.data()),
            64);
  EXPECT_EQ(backend->live_bytes(), 64 + 2 * 512);
}

TEST(GpuGuardBands, CudaSetsReportWritesOutsideTheirStorage) {
  std::unique_ptr<DeviceBackend> backend;
  try {
    backend = backends::make_device_backend("cuda", 0);
  } catch (const Error& e) {
    GTEST_SKIP() << "no usable CUDA device: " << e.what();
  }
  check_backend(*backend);
}

}  // namespace
}  // namespace kforge::worker
