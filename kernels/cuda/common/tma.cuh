// Hopper's tensor memory accelerator (TMA, sm_90) for the tile loads of the wgmma kernels: the
// host-side encoding of a batched (3-D) fp32 tensor map (K-major rows, 32-float boxes in the 128-byte
// swizzle that wgmma's descriptors read), and the device-side bulk tensor copy completing on a
// shared-memory mbarrier (arrive with an expected byte count, wait on the phase parity).
// One thread issues a whole tile; the other threads only wait, so the copies cost the k-loop
// no instructions, and boxes that reach past the tensor are zero-filled by the hardware.
// Sources: PTX ISA 9.0, "cp.async.bulk.tensor", "mbarrier" (expect-tx, try_wait.parity);
// CUDA Driver API, cuTensorMapEncodeTiled (obtained through cudaGetDriverEntryPointByVersion,
// so that a kernel library needs no link to libcuda).
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000
#include <cuda_runtime.h>

#include <cstdint>

namespace kf::tma {

/// cuTensorMapEncodeTiled, looked up once per process through the runtime (no libcuda link), or
/// null when the driver lacks it.
inline PFN_cuTensorMapEncodeTiled_v12000 tiled_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess)
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

/// Fills `map` for `batches` row-major fp32 matrices [rows, cols] at `base` (row stride `ld`,
/// batch stride `batch_stride`, both in floats; cols contiguous), read in boxes of BOX_ROWS x 32
/// floats of one batch (one 128-byte swizzle row each) with the 128-byte swizzle; elements
/// outside [rows, cols] read as zero. Returns true on success; false when the matrices do not
/// qualify (base not 16-byte aligned; ld or batch_stride not a multiple of 4 floats; a
/// dimension of 2^31 or more) or the driver lacks the entry point, and the caller takes another
/// path.
template <int BOX_ROWS>
inline bool encode_rows_f32(CUtensorMap* map, const float* base, int64_t rows, int64_t cols,
                            int64_t ld, int64_t batches, int64_t batch_stride) {
  static_assert(BOX_ROWS >= 1 && BOX_ROWS <= 256, "a TMA box dimension is at most 256");
  const auto encode = tiled_encoder();
  if (encode == nullptr) return false;
  if (batches == 1) batch_stride = rows * ld;  // unused; any valid stride
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0 || ld % 4 != 0 || batch_stride % 4 != 0)
    return false;
  constexpr int64_t kLimit = int64_t{1} << 31;
  if (rows <= 0 || cols <= 0 || batches <= 0 || rows >= kLimit || cols >= kLimit ||
      batches >= kLimit || ld < cols || batch_stride < rows * ld)
    return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(batches)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(ld) * sizeof(float),  // bytes
                                 static_cast<cuuint64_t>(batch_stride) * sizeof(float)};
  const cuuint32_t box[3] = {32, BOX_ROWS, 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<float*>(base), dims, strides,
                box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/// Initializes the mbarrier at `bar` for `count` arrivals and makes it visible to the copy
/// engine; the caller then synchronizes the block before any thread uses it.
__device__ __forceinline__ void init_barrier(uint64_t* bar, uint32_t count) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// Arrives on `bar` expecting `bytes` more bytes of copies to complete on it this phase.
__device__ __forceinline__ void arrive_expect_bytes(uint64_t* bar, uint32_t bytes) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(addr), "r"(bytes)
               : "memory");
}

/// Waits until the phase of `bar` with parity `parity` has completed.
__device__ __forceinline__ void wait_parity(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (done == 0);
}

/// Copies the box at (column col0, row row0, batch batch) of the 3-D tensor `map` describes into
/// `dst` (1024-byte aligned for the 128-byte swizzle), completing its bytes on `bar`. `map` must
/// be a __grid_constant__ kernel parameter (or otherwise in constant, parameter or global memory).
__device__ __forceinline__ void load_box_3d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int32_t col0, int32_t row0, int32_t batch) {
  const uint32_t dst_addr = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  const uint32_t bar_addr = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst_addr),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar_addr), "r"(col0), "r"(row0), "r"(batch)
      : "memory");
}

}  // namespace kf::tma
