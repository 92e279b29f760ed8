/* kforge kernel ABI, version 1.
 *
 * The only header a kernel author must include. A candidate is one shared object that exports
 *
 *     extern "C" int kforge_run(const kforge_args* args);
 *
 * kforge calls it once per evaluation with the task's tensors (DLPack DLTensor, see
 * dlpack/dlpack.h) and scalars in signature order. On the `cuda` backend every tensor lives in
 * device memory of the worker's device and the kernel must launch its work on `args->stream`
 * (a cudaStream_t); it must not synchronize the device or create streams. On the `cpu` backend
 * tensors live in host memory and `stream` is NULL. The candidate picks its own grid and block.
 *
 * Element types: f32, f64, f16 ({kDLFloat, 16}), bf16 ({kDLBfloat, 16}), i32, i64, and bool as
 * {kDLUInt, 8} holding 0 or 1 (a PyTorch mask; DLPack 0.6 has no bool code).
 *
 * Return 0 on success; any other value is reported as a runtime_error with that code.
 * Output tensors are poisoned (NaN) before each call, so every element must be written.
 */
#ifndef KFORGE_KERNEL_H_
#define KFORGE_KERNEL_H_

#include <dlpack/dlpack.h>
#include <stdint.h>

#define KFORGE_ABI_VERSION 1

#ifdef __cplusplus
#define KFORGE_EXTERN_C extern "C"
#else
#define KFORGE_EXTERN_C
#endif

#define KFORGE_API KFORGE_EXTERN_C __attribute__((visibility("default")))

/* Arguments of one call. Arrays are in the order of the task's signature.
 * Shapes and strides are in elements (DLPack convention); strides may be NULL for compact
 * row-major tensors. Scalars are passed as double whatever their declared dtype. */
typedef struct kforge_args {
  int32_t abi_version;     /* == KFORGE_ABI_VERSION */
  int32_t num_inputs;
  const DLTensor* inputs;  /* read-only: kforge verifies they are unchanged after the call */
  int32_t num_outputs;
  const DLTensor* outputs; /* the data they point to is written by the kernel */
  int32_t num_scalars;
  const double* scalars;
  void* stream;            /* cudaStream_t on `cuda`, NULL on `cpu` */
} kforge_args;

/* The entry point every candidate defines. */
KFORGE_API int kforge_run(const kforge_args* args);

/* Tag that lets the worker check the candidate was built against this ABI. Weak, so that a
 * candidate made of several translation units links. */
KFORGE_API __attribute__((weak)) int kforge_abi_version(void) { return KFORGE_ABI_VERSION; }

/* Number of elements of a tensor (product of its shape). */
static inline int64_t kforge_numel(const DLTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

#endif /* KFORGE_KERNEL_H_ */
