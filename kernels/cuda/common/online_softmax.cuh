// The online softmax normalizer (Milakov & Gimelshein 2018, "Online normalizer calculation for
// softmax", algorithm 3): a running pair (m, s) = (max so far, sum of exp(x - m) so far) that
// folds in more values, or another pair, in one pass. Shared by the softmax and log-softmax
// kernels (warp_per_row and block_per_row with ONLINE, cluster_per_row, split_row_resident).
// (-FLT_MAX, 0) is the identity: exp(-FLT_MAX - m) underflows to 0 and 0 * anything stays 0, so
// no inf - inf appears. fp32 throughout; __expf (fast, ~2 ulp over the range used).
#pragma once

namespace kf::online_softmax {

/// Merges the pair (om, os) into (m, s).
__device__ __forceinline__ void merge(float& m, float& s, float om, float os) {
  const float nm = fmaxf(m, om);
  s = s * __expf(m - nm) + os * __expf(om - nm);
  m = nm;
}

/// Merges the pairs of the 32 lanes of a warp (butterfly): every lane ends with the warp's.
__device__ __forceinline__ void warp_merge(float& m, float& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  }
}

/// Folds V values into a thread's pair: the sum is rescaled only when the vector raises the
/// running max (rare after the first few vectors of random data), so a vector costs V
/// exponentials instead of the V + 2 of a full merge.
template <int V>
__device__ __forceinline__ void accumulate(const float (&v)[V], float& m, float& s) {
  float cm = v[0];
#pragma unroll
  for (int k = 1; k < V; ++k) cm = fmaxf(cm, v[k]);
  if (cm > m) {
    s *= __expf(m - cm);
    m = cm;
  }
#pragma unroll
  for (int k = 0; k < V; ++k) s += __expf(v[k] - m);
}

}  // namespace kf::online_softmax
