// Host-side tensor data shared by every backend: element conversions, DLPack dtypes and the
// deterministic inputs a check or a timing run feeds to kernels.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/task.h"

namespace kforge::worker {


/// IEEE 754 binary16 bits of `value`, rounded to nearest even; overflow gives +-inf, NaN stays
/// NaN, tiny values become subnormals or zero.
uint16_t float_to_half(float value);
/// Exact float value of binary16 bits.
float half_to_float(uint16_t bits);
/// bfloat16 bits of `value` (the top 16 bits of the float, rounded to nearest even; NaN stays NaN).
uint16_t float_to_bfloat16(float value);
/// Exact float value of bfloat16 bits.
float bfloat16_to_float(uint16_t bits);

/// The DLPack type of `dtype`: kDLFloat/kDLBfloat/kDLInt with its bit width, one lane.
DLDataType to_dl_dtype(DType dtype);

/// Product of the dimensions (1 for a scalar shape).
int64_t element_count(const std::vector<int64_t>& shape);

/// Element `index` of a host buffer holding `dtype` elements, widened to double.
double element_as_double(DType dtype, const std::byte* data, int64_t index);

/// How generated input values are distributed. A check cycles through the first three
/// (distribution_for_case) so that a kernel must be right on plain data, on Gaussian data and on
/// data spanning six decades, where closed-form shortcuts and "skip small values" tricks fail.
/// pareto and spike are the adversarial ones for reductions (the gate adds them by default,
/// gate.h): a few elements at random positions outweigh all the others, so a kernel that reads a
/// subsample, half the rows, or clips outliers is wrong on them.
enum class InputDistribution {
  uniform,       ///< floats uniform in [-1, 1]; integers uniform in [-16, 16]
  normal,        ///< floats standard normal (ziggurat); integers as for uniform
  heavy_tailed,  ///< floats +-10^u with u uniform in [-3, 3); integers uniform in [-1000, 1000]
  small,         ///< floats uniform in [-2^-10, 2^-10] (mean square ~3e-7, below a norm's eps of
                 ///< 1e-5, so a wrong eps shows); integers as for uniform
  pareto,        ///< floats +-u1/u2, u1, u2 uniform in (0, 1]: P(|x| > t) = 1/(2t) beyond 1 (the
                 ///< tail of Cauchy), |x| in [2^-26, 2^26] (beyond 65504 f16 holds +-inf);
                 ///< integers +-65536/k, k uniform in 1..65536
  spike,         ///< floats as for small, except one element in 4096 (at random positions) is
                 ///< +-[1024, 2048); integers +-1, spikes +-1024..2047
};

/// Index remaps of the self-test probes (self_check.h): element e of a remapped input holds the
/// value of another element of the same generated tensor (generator::remapped_index).
enum class InputRemap {
  none,
  every_16th,  ///< element e holds element 16 * floor(e / 16): what a strided subsample reads
  half_rows,   ///< the last floor(rows / 2) rows (first dimension) repeat the first ones
};
/// "none", "every_16th" or "half_rows".
std::string to_string(InputRemap remap);
/// Inverse of to_string; throws Error naming `name` and listing the valid names.
InputRemap parse_input_remap(const std::string& name);

/// "uniform", "normal", "heavy_tailed", "small", "pareto" or "spike".
std::string to_string(InputDistribution distribution);
/// Inverse of to_string; throws Error naming `name` and listing the valid names.
InputDistribution parse_input_distribution(const std::string& name);
/// The distribution of the `seed_index`-th (0-based) seed of a check: uniform, normal,
/// heavy_tailed, uniform, ... so any three consecutive seeds cover every distribution.
InputDistribution distribution_for_case(uint64_t seed_index);

/// Input data for tensor number `tensor_index` (its position in the signature) under `seed`:
/// `elements` values of `dtype`, little-endian bytes, drawn from `distribution`.
///
/// Every distribution makes about 1% of the values exact zeros (10 of the 1024 values of ten hash
/// bits: 0.98%) and about half of them negative. Floating values are computed in double and
/// rounded to the dtype exactly once (f16/bf16 through a round-to-odd float, so the two steps
/// equal one direct rounding); the f32/f16/bf16 tensors of a (seed, tensor, distribution) are the
/// f64 tensor rounded. Normal values come from the 256-layer ziggurat (Marsaglia & Tsang 2000);
/// heavy-tailed magnitudes lie in [1e-3, 1e3), which every dtype holds and which keeps sums of a
/// few dozen values finite even in f16. Integers are zero only for the 1% zeros: +-1..16
/// (uniform, normal) or +-1..1000 (heavy_tailed), small enough for sums to stay exact.
///
/// Counter-based: element e depends only on (dtype, seed, tensor_index, distribution, e), never on
/// the thread count or the tensor's length (a shorter tensor is a prefix). The key
/// is splitmix64(splitmix64(splitmix64(seed) ^ uint32(tensor_index)) ^ ((distribution + 1) << 32))
/// and element e uses output number e of SplitMix64 started at that key (Steele, Lea, Flood,
/// OOPSLA 2014); the 1.2% of normal draws that the ziggurat rejects draw again from a second
/// stream. Only correctly rounded operations are used (no libm transcendentals, no fused
/// multiply-add), so the bytes are the same on every machine and standard library. Inputs of 2^20
/// elements or more are filled by usable_cpus() threads (common/cpus.h) over contiguous chunks.
std::vector<std::byte> make_input(DType dtype, int64_t elements, uint64_t seed, int tensor_index,
                                  InputDistribution distribution);
/// make_input with InputDistribution::uniform.
std::vector<std::byte> make_input(DType dtype, int64_t elements, uint64_t seed, int tensor_index);

/// Writes into `out` exactly the bytes make_input(dtype, out.size() / dtype_size(dtype), ...)
/// returns. For large tensors prefer it over make_input with a buffer that is reused (or pinned):
/// the std::vector that make_input returns is zero-filled by one thread first, and that first
/// touch of fresh pages costs several times the generation itself (6.4 GB: 3.8 s against
/// 0.5-1.1 s on 16 cores). `threads` = 0 picks as make_input does; a positive value forces that
/// many threads (tests check the bytes do not depend on it). Throws Error if out.size() is not a
/// multiple of the element size.
void fill_input(std::span<std::byte> out, DType dtype, uint64_t seed, int tensor_index,
                InputDistribution distribution, int threads = 0);

/// fill_input with `remap` applied: element e of `out` holds element remapped_index(e) of the
/// tensor fill_input writes, `rows` being the tensor's first dimension (ignored by every_16th).
/// InputRemap::none is fill_input. One thread: for the self-test's gate-sized tensors. Throws
/// Error as fill_input does, or if `rows` < 1 for half_rows or does not divide the elements.
void fill_input_remapped(std::span<std::byte> out, DType dtype, uint64_t seed, int tensor_index,
                         InputDistribution distribution, InputRemap remap, int64_t rows);

}  // namespace kforge::worker
