// Hopper warpgroup MMA (wgmma, sm_90a) helpers of the 3xTF32 kernels: fences, commit and wait,
// the shared-memory matrix descriptor of a K-major tile in the 128-byte-swizzled layout, and the
// m64nNk8 TF32 products with fp32 accumulators. Include only where __CUDA_ARCH_FEAT_SM90_ALL is
// defined (the sm_90a pass) or in host code: a plain sm_90 pass cannot assemble wgmma.
// Source: PTX ISA 9.0, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate".
#pragma once

#include <cuda/common/tf32x3.cuh>  // smem_addr

#include <cstdint>

namespace kf::wgmma {

using kf::tf32x3::smem_addr;

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
/// Waits until at most `Pending` committed wgmma groups of this warpgroup are still running.
template <int Pending>
__device__ __forceinline__ void wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/// Keeps the compiler from moving reads or writes of `r` across a wgmma fence or wait.
template <int R>
__device__ __forceinline__ void fence_operands(float (&r)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

/// Shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address >> 4
/// (bits 0-13), leading byte offset 16 >> 4 (bits 16-29; unused for K-major swizzled tiles whose
/// K fits one swizzle row), stride byte offset 1024 >> 4 between 8-row groups (bits 32-45),
/// base offset 0 (tiles 1024-byte aligned), swizzle mode 1 = 128-byte (bits 62-63).
__device__ __forceinline__ uint64_t descriptor(const float* tile) {
  const uint64_t addr = smem_addr(tile);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

/// Issues 4-byte cp.async copies of rows [row0, row0 + ROWS) x k-slice [k0, k0 + 32) of a K-major
/// matrix (rows x K, row stride ld) into `tile` in the 128-byte-swizzled layout descriptor()
/// reads (a 32-float row; chunk q of row r at q ^ (r % 8)), zero-filling what lies outside; THREADS
/// threads, `tid` this one. The path of rows that 16-byte copies and TMA cannot read (K % 4 != 0,
/// an unaligned base).
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_swizzled_4(float* tile, const float* src, int64_t rows,
                                                int64_t K, int64_t ld, int64_t row0, int64_t k0,
                                                int tid) {
  constexpr int kRow = 32, kElements = ROWS * kRow;
  static_assert(kElements % THREADS == 0, "whole copies per thread");
  // Not unrolled whole: 16 address pairs a thread live at once spill at 128-row W tiles.
#pragma unroll 4
  for (int i = 0; i < kElements / THREADS; ++i) {
    const int idx = tid + i * THREADS, r = idx / kRow, c = idx % kRow;
    const bool ok = row0 + r < rows && k0 + c < K;
    const float* p = ok ? src + (row0 + r) * ld + k0 + c : src;
    kf::tf32x3::cp_async_4(tile + r * kRow + (((c >> 2) ^ (r & 7)) << 2) + (c & 3), p, ok ? 4 : 0);
  }
}

/// d (+)= a * b for one m64n64k8 tile of the warpgroup: a, b shared-memory descriptors (K-major,
/// 128-byte swizzle), d 32 fp32 registers a thread (layout in the header); scale_d 0 ignores d.
__device__ __forceinline__ void m64n64k8(float (&d)[32], uint64_t a, uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(scale_d));
}

/// d (+)= a * b for one m64n128k8 tile of the warpgroup: a, b shared-memory descriptors (K-major,
/// 128-byte swizzle), d 64 fp32 registers a thread (layout in the header); scale_d 0 ignores d.
__device__ __forceinline__ void m64n128k8(float (&d)[64], uint64_t a, uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(scale_d));
}


/// One m64 x N x k8 product of the warpgroup (N = BN), d += a * b (scale_d 0: d = a * b).
template <int N>
__device__ __forceinline__ void tile(float (&d)[N / 2], uint64_t a, uint64_t b, int scale_d) {
  if constexpr (N == 64) m64n64k8(d, a, b, scale_d);
  else m64n128k8(d, a, b, scale_d);
}


/// d (+)= a * b for one m64nNk8 tile with A from registers (the "RS" form): a the thread's four
/// tf32 values of the 64 x 8 A tile, in mma.m16n8k8's layout per warp (warp w of the warpgroup
/// holds rows 16w .. 16w + 15; g = lane / 4, t = lane % 4: a0 = (g, t), a1 = (g + 8, t),
/// a2 = (g, t + 4), a3 = (g + 8, t + 4)); b a shared-memory descriptor (K-major, 128-byte
/// swizzle); d N / 2 fp32 registers a thread; scale_d 0 ignores d. The registers of a must stay
/// unchanged until the wgmma completes (wait_group).
__device__ __forceinline__ void m64n64k8_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b,
                                            int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}

__device__ __forceinline__ void m64n128k8_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b,
                                              int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}

/// One m64 x N x k8 product of the warpgroup with A from registers (N = BN).
template <int N>
__device__ __forceinline__ void tile_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b,
                                        int scale_d) {
  if constexpr (N == 64) m64n64k8_rs(d, a, b, scale_d);
  else m64n128k8_rs(d, a, b, scale_d);
}

}  // namespace kf::wgmma
