// Guard bands: allocation before and after every tensor a candidate's call receives, filled with
// a canary and checked after its calls, so that a kernel writing a few elements past (or before)
// an output lands in memory nobody else uses and is reported, instead of passing silently in
// the allocator's slack or corrupting a neighbouring buffer. TensorSet (tensor_set.h) gives
// every buffer both bands; run_outputs and the timing re-check read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "worker/device_backend.h"

namespace kforge::worker {

/// Bytes of each band. 4 KiB: a whole 256-thread block each storing one float4 (16 bytes) past
/// the end, or a warp's 32 x float4 (512 bytes) from either edge, lands inside it, so the usual
/// tail overruns of vectorized code are caught and measured exactly without reaching another
/// allocation. A multiple of 256, so the data pointer keeps allocate()'s alignment; 8 KiB per
/// tensor is nothing next to its storage, and it is all the check reads back.
inline constexpr int64_t kGuardBandBytes = 4096;

enum class GuardSide { before, after };

/// The canary of one band: kGuardBandBytes pseudo-random bytes (SplitMix64 of the tensor's index,
/// the side and the position). Not a constant byte: 0x00 is what zero-filling and accumulator
/// initialisation write, 0xFF is the NaN poison a kernel may copy out of its own unwritten
/// output, and any single repeated byte is some plausible value in some dtype (0xA5A5 is
/// -0.0227 in f16). Random bytes make any value a kernel writes match an element of the band
/// only by chance (1 in 2^32 for an f32), and the per-tensor salt keeps a kernel that copies
/// x[n] to y[n] from copying x's canary into y's band unseen.
std::vector<std::byte> guard_canary(int tensor_index, GuardSide side);

/// How far into `band` a kernel wrote, in bytes from the storage's edge to the farthest byte
/// that differs from `canary` (same size): for the band after, 1 + the last differing offset;
/// for the band before, the band size - the first differing offset. 0 when it is intact.
int64_t guard_overrun(std::span<const std::byte> band, std::span<const std::byte> canary,
                      GuardSide side);

/// Writes the canaries of tensor `tensor_index` into both bands of `buffer` (a blocking copy of
/// 2 x kGuardBandBytes). Throws DeviceError.
void fill_guard_bands(DeviceBackend& backend, const DeviceBuffer& buffer, int tensor_index);

/// Bytes written into each band of `buffer` since fill_guard_bands (guard_overrun of each):
/// reads back only the bands (on cpu, compared in place), so the cost does not grow with the
/// tensor. Throws DeviceError (e.g. a fault of the candidate surfacing on the copy).
struct GuardOverrun {
  int64_t before_bytes = 0;
  int64_t after_bytes = 0;
};
GuardOverrun check_guard_bands(DeviceBackend& backend, const DeviceBuffer& buffer,
                               int tensor_index);

}  // namespace kforge::worker
