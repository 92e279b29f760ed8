#include "worker/guard_bands.h"

#include <cstring>

#include "common/error.h"
#include "worker/input_generator.h"

namespace kforge::worker {
namespace {

/// Salt of the canary stream, so that it shares no prefix with the input generator's streams.
constexpr uint64_t kCanarySalt = 0x6B666F7267654775ULL;  // "kforgeGu"

void require_band(const DeviceBuffer& buffer) {
  if (buffer.guard_bytes() != kGuardBandBytes) {
    throw Error("guard bands: the buffer has bands of " + std::to_string(buffer.guard_bytes()) +
                " bytes, expected " + std::to_string(kGuardBandBytes));
  }
}

}  // namespace

std::vector<std::byte> guard_canary(int tensor_index, GuardSide side) {
  std::vector<std::byte> canary(static_cast<size_t>(kGuardBandBytes));
  const uint64_t key = generator::splitmix64(
      kCanarySalt ^ (static_cast<uint64_t>(tensor_index) * 2 + (side == GuardSide::after)));
  for (int64_t word = 0; word * 8 < kGuardBandBytes; ++word) {
    const uint64_t bits = generator::stream_value(key, word);
    std::memcpy(canary.data() + word * 8, &bits, 8);
  }
  return canary;
}

int64_t guard_overrun(std::span<const std::byte> band, std::span<const std::byte> canary,
                      GuardSide side) {
  if (band.size() != canary.size()) throw Error("guard_overrun: band and canary sizes differ");
  const auto size = static_cast<int64_t>(band.size());
  if (side == GuardSide::after) {
    for (int64_t i = size; i-- > 0;) {
      if (band[static_cast<size_t>(i)] != canary[static_cast<size_t>(i)]) return i + 1;
    }
  } else {
    for (int64_t i = 0; i < size; ++i) {
      if (band[static_cast<size_t>(i)] != canary[static_cast<size_t>(i)]) return size - i;
    }
  }
  return 0;
}

void fill_guard_bands(DeviceBackend& backend, const DeviceBuffer& buffer, int tensor_index) {
  require_band(buffer);
  backend.copy_to_device(buffer.band_before(), guard_canary(tensor_index, GuardSide::before).data(),
                         kGuardBandBytes);
  backend.copy_to_device(buffer.band_after(), guard_canary(tensor_index, GuardSide::after).data(),
                         kGuardBandBytes);
}

GuardOverrun check_guard_bands(DeviceBackend& backend, const DeviceBuffer& buffer,
                               int tensor_index) {
  require_band(buffer);
  GuardOverrun overrun;
  for (const GuardSide side : {GuardSide::before, GuardSide::after}) {
    const std::vector<std::byte> canary = guard_canary(tensor_index, side);
    int64_t written = 0;
    // One piece: the bands are below the cuda backend's staging size, and on cpu in place.
    backend.read_back(side == GuardSide::before ? buffer.band_before() : buffer.band_after(),
                      kGuardBandBytes,
                      [&](const std::byte* data, int64_t offset, int64_t size) {
                        if (offset != 0 || size != kGuardBandBytes) {
                          throw Error("guard bands: the band was read back in pieces");
                        }
                        written = guard_overrun({data, static_cast<size_t>(size)}, canary, side);
                      });
    (side == GuardSide::before ? overrun.before_bytes : overrun.after_bytes) = written;
  }
  return overrun;
}

}  // namespace kforge::worker
