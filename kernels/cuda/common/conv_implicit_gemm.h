// The index math of grouped_conv's implicit GEMM (kernels/cuda/grouped_conv/
// implicit_gemm_3xtf32.cu): which input element B[k, p] is, where output (m, p) is stored, and
// the limits the launch checks. Plain C++ (the device code includes it too) so that a CPU test
// runs the kernel's gather on the host and compares with a direct convolution
// (tests/conv_implicit_gemm_test.cpp).
//
// Per group g (NVIDIA CUTLASS, "Implicit GEMM convolution", docs/implicit_gemm_convolution.md;
// NCDHW here, with PyTorch's weight layout):
//   C[m, p] = sum_k A[m, k] * B[k, p],  m < M = cog,  p < N = n * od*oh*ow,  k < K = cig * taps
//   A[m, k] = weight[g*cog + m] read as [K], k = (ci, kd, kh, kw) (contiguous: no gather)
//   B[k, p] = x[n, g*cig + ci, od*sd - pd + kd*dd, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] for
//             p = (n, od, oh, ow), 0 where that index lies in the padding
//   y[n, g*cog + m, od, oh, ow] = epilogue(C[m, p] + bias[g*cog + m])
#pragma once

#include <common/conv_args.h>

#include <cstdint>

namespace kf::conv_igemm {

/// The geometry by value (a kernel argument) with what the launch derives from it. Offsets
/// inside one (n, group) slice of x and the K index are int (plan() checks they fit).
struct Plan {
  ConvArgs c;
  int64_t positions = 0;              // N = n * od*oh*ow
  int k_total = 0;                    // K = cig * taps
  int in_volume = 0;                  // d*h*w: floats between input channels
  int in_plane = 0;                   // h*w
  int in_width = 0;                   // w
  int out_volume = 0;                 // od*oh*ow
  int out_plane = 0;                  // oh*ow
  unsigned in_extent[3] = {0, 0, 0};  // d, h, w: index i is inside when unsigned(i) < extent
};

/// Fills p's derived fields from p.c for a launch of (ceil(N / n_tile), ceil(cog / m_tile),
/// groups) blocks; false when that grid or an int offset would not fit: K, cig * d*h*w or
/// od*oh*ow >= 2^31, more than 2^31 - 1 N tiles, or more than 65535 M tiles or groups.
inline bool plan(Plan& p, int m_tile, int n_tile) {
  const ConvArgs& c = p.c;
  constexpr int64_t kIntMax = 0x7fffffff, kGridYZ = 65535;
  const int64_t k_total = static_cast<int64_t>(c.cig) * c.taps();
  const int64_t in_volume = c.in_volume(), out_volume = c.out_volume();
  p.positions = c.n * out_volume;
  const int64_t n_tiles = (p.positions + n_tile - 1) / n_tile;
  const int64_t m_tiles = (c.cog + m_tile - 1) / m_tile;
  if (k_total >= kIntMax || c.cig * in_volume >= kIntMax || out_volume >= kIntMax ||
      n_tiles > kIntMax || m_tiles > kGridYZ || c.groups > kGridYZ) {
    return false;
  }
  p.k_total = static_cast<int>(k_total);
  p.in_volume = static_cast<int>(in_volume);
  p.in_plane = static_cast<int>(c.dim[1].in * c.dim[2].in);
  p.in_width = static_cast<int>(c.dim[2].in);
  p.out_volume = static_cast<int>(out_volume);
  p.out_plane = static_cast<int>(c.dim[1].out * c.dim[2].out);
  for (int i = 0; i < 3; ++i) p.in_extent[i] = static_cast<unsigned>(c.dim[i].in);
  return true;
}

/// A k row of B: k = (ci, kd, kh, kw), ci held as its offset ci * d*h*w. k = -1: not yet placed.
struct Cursor {
  int k = -1, ci_offset = 0, kd = 0, kh = 0, kw = 0;
};

/// The cursor at row k (divisions: once per thread and k-loop).
KF_CONV_HD Cursor seek(const Plan& p, int k) {
  const int taps = p.c.taps(), plane_taps = p.c.dim[1].k * p.c.dim[2].k;
  const int tap = k % taps, plane_tap = tap % plane_taps;
  Cursor cur;
  cur.k = k;
  cur.ci_offset = k / taps * p.in_volume;
  cur.kd = tap / plane_taps;
  cur.kh = plane_tap / p.c.dim[2].k;
  cur.kw = plane_tap % p.c.dim[2].k;
  return cur;
}

/// Moves the cursor kStep rows on with carries (kw fastest, then kh, kd, ci: weight[co, ci, kd,
/// kh, kw] order) instead of divisions. Past K the cursor keeps counting; tap_source says 0.
template <int kStep>
KF_CONV_HD void advance(const Plan& p, Cursor& cur) {
  const int kd = p.c.dim[0].k, kh = p.c.dim[1].k, kw = p.c.dim[2].k;
  cur.k += kStep;
  cur.kw += kStep;
  while (cur.kw >= kw) {
    cur.kw -= kw;
    if (++cur.kh < kh) continue;
    cur.kh = 0;
    if (++cur.kd < kd) continue;
    cur.kd = 0;
    cur.ci_offset += p.in_volume;
  }
}

/// One output position p of a group: the input slice x[n, g*cig] it reads and the input index of
/// its tap 0 per dimension (o * stride - padding).
struct Origin {
  const float* x = nullptr;
  int id = 0, ih = 0, iw = 0;
};

/// The origin of output position `position` of group `group`. A position past N gets a depth
/// origin that its last depth tap still leaves below 0: every tap_source of it is 0.
KF_CONV_HD Origin origin_of(const Plan& p, int64_t position, int group) {
  const ConvArgs& c = p.c;
  if (position >= p.positions) return {c.x, -(c.dim[0].k - 1) * c.dim[0].dil - 1, 0, 0};
  const int64_t n = position / p.out_volume;
  const int s = static_cast<int>(position - n * p.out_volume);
  const int od = s / p.out_plane, rest = s - od * p.out_plane;
  const int out_w = static_cast<int>(c.dim[2].out);
  const int oh = rest / out_w, ow = rest - oh * out_w;
  Origin o;
  o.x = c.x + (n * c.c + static_cast<int64_t>(group) * c.cig) * p.in_volume;
  o.id = od * c.dim[0].stride - c.dim[0].pad;
  o.ih = oh * c.dim[1].stride - c.dim[1].pad;
  o.iw = ow * c.dim[2].stride - c.dim[2].pad;
  return o;
}

/// B[cur.k, position of o]: returns whether it is an input element (then `src` points at it) or
/// 0 (padding, or k past K; then `src` is x's base, a valid address for a zero-filling copy).
KF_CONV_HD bool tap_source(const Plan& p, const Origin& o, const Cursor& cur, const float*& src) {
  const int id = o.id + cur.kd * p.c.dim[0].dil;
  const int ih = o.ih + cur.kh * p.c.dim[1].dil;
  const int iw = o.iw + cur.kw * p.c.dim[2].dil;
  const bool inside = cur.k < p.k_total && static_cast<unsigned>(id) < p.in_extent[0] &&
                      static_cast<unsigned>(ih) < p.in_extent[1] &&
                      static_cast<unsigned>(iw) < p.in_extent[2];
  src = inside ? o.x + cur.ci_offset + id * p.in_plane + ih * p.in_width + iw : p.c.x;
  return inside;
}

/// Offset in y of output position `position` (< N) in channel g*cog; channel g*cog + m is
/// m * od*oh*ow further.
KF_CONV_HD int64_t y_offset(const Plan& p, int64_t position, int group) {
  const int64_t n = position / p.out_volume;
  const int64_t s = position - n * p.out_volume;
  return (n * p.c.co + static_cast<int64_t>(group) * p.c.cog) * p.out_volume + s;
}

}  // namespace kf::conv_igemm
