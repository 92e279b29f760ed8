// Host-side tensor data shared by every backend: element conversions, DLPack dtypes and the
// deterministic inputs a check or a timing run feeds to kernels.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "task/task.h"

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

/// Input data for tensor number `tensor_index` (its position in the signature) under `seed`:
/// `elements` values of `dtype`, little-endian bytes. Floating types are uniform in [-1, 1]
/// (drawn in double, then rounded to the dtype); integer types uniform in [-16, 16], small enough
/// for sums to stay exact and not all-equal. The stream is std::mt19937_64 seeded from a mix of
/// (seed, tensor_index), so the same pair gives the same bytes on every machine and backend.
std::vector<std::byte> make_input(DType dtype, int64_t elements, uint64_t seed, int tensor_index);

}  // namespace kforge::worker
