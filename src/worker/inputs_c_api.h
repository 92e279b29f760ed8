/* kforge's input generator behind a plain C ABI (libkforge_inputs.so), for processes that are not
 * kforge's own: the PyTorch reference worker (python/kforge_torch/inputs.py) loads it through
 * ctypes so that a module under test sees exactly the bytes a native kernel sees for the same
 * (seed, tensor, distribution). A C ABI rather than a Python extension so that one build serves
 * every Python version (3.11 here, 3.12 on the GPU machine). docs/torch_tasks.md describes it.
 *
 * dtype numbering is DType's (src/core/task.h): 0 f32, 1 f64, 2 f16, 3 bf16, 4 i32, 5 i64,
 * 6 bool (one byte, 0 or 1).
 * distribution numbering is InputDistribution's (src/worker/host_data.h): 0 uniform, 1 normal,
 * 2 heavy_tailed, 3 small, 4 pareto, 5 spike. remap numbering is InputRemap's: 0 none,
 * 1 every_16th, 2 half_rows. Values: host_data.h, make_input and fill_input_remapped. */
#ifndef KFORGE_INPUTS_C_API_H_
#define KFORGE_INPUTS_C_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: distributions pareto and spike, kforge_fill_input_host_remapped. */
#define KFORGE_INPUTS_ABI_VERSION 2

/* KFORGE_INPUTS_ABI_VERSION of the loaded library. */
__attribute__((visibility("default"))) int kforge_inputs_abi_version(void);

/* Writes `elements` (>= 0) values of `dtype` into host memory `out` (elements x dtype size bytes,
 * row-major, compact): element e of make_input(dtype, seed, tensor_index, distribution). Uses all
 * cores for large tensors. Returns 0, or -1 with kforge_inputs_last_error() saying why (an unknown
 * dtype or distribution, a null `out` with elements > 0). */
__attribute__((visibility("default"))) int kforge_fill_input_host(void* out, int64_t elements,
                                                                  int dtype, uint64_t seed,
                                                                  int tensor_index,
                                                                  int distribution);

/* kforge_fill_input_host with the self-test remap `remap` applied (fill_input_remapped): element e
 * holds element remapped_index(e) of the generated tensor, whose first dimension is `rows` (>= 1,
 * dividing `elements`; only half_rows reads it). Returns 0, or -1 with kforge_inputs_last_error()
 * saying why (also an unknown remap or a bad row count). */
__attribute__((visibility("default"))) int kforge_fill_input_host_remapped(
    void* out, int64_t elements, int dtype, uint64_t seed, int tensor_index, int distribution,
    int remap, int64_t rows);

/* The same bytes into device memory `out` of the current device, enqueued on `stream` (a
 * cudaStream_t; NULL = the legacy default stream); asynchronous. Returns the CUDA error code
 * (0 = success), or -1 with kforge_inputs_last_error() set for a bad argument or when this library
 * was built without CUDA. */
__attribute__((visibility("default"))) int kforge_fill_input_device(void* out, int64_t elements,
                                                                    int dtype, uint64_t seed,
                                                                    int tensor_index,
                                                                    int distribution,
                                                                    void* stream);

/* Why the last failing call of this thread failed ("" if none). Valid until the next call. */
__attribute__((visibility("default"))) const char* kforge_inputs_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* KFORGE_INPUTS_C_API_H_ */
