// Device-side helpers of the cuda backend's evaluation work (cuda_inputs.cu, compiled by nvcc):
// generating a kernel's inputs in device memory with the host's generator (input_generator.h),
// checking after a call that they are unchanged, and hashing outputs. On a KernelBench-sized
// tensor (6.4 GB) generation on the host and upload take about a second; on the device, a few
// milliseconds, and nothing has to be kept on the host to check the inputs afterwards.
//
// Plain C++ interface: callers need no CUDA headers. Every function enqueues on `stream` (a
// cudaStream_t), waits for its result where it returns one, and returns the CUDA error code
// (0 = success) for the caller to turn into a DeviceError.
#pragma once

#include <cstdint>

#include "worker/input_generator.h"


namespace kforge::worker::cuda_inputs {

using generator::GeneratedTensor;

/// Writes the tensor's storage at `device`. Asynchronous on `stream`.
int generate(void* device, const GeneratedTensor& tensor, void* stream);

/// The first storage element of `device` that differs from what generate writes, or -1 when all
/// are equal, in `*first` (waits for the stream). `scratch` is 8 bytes of device memory.
int first_difference(const void* device, const GeneratedTensor& tensor, void* stream,
                     void* scratch, int64_t* first);

/// A 64-bit hash of `bytes` bytes at `device` (256-byte aligned): the sum over 8-byte words w_i
/// (the tail zero-padded) of splitmix64(w_i ^ splitmix64(i)), mod 2^64. Order-free so that blocks
/// combine by atomic adds; any change of one word changes it. `scratch` is 8 bytes of device
/// memory. Waits for the stream.
int content_hash(const void* device, int64_t bytes, void* stream, void* scratch, uint64_t* hash);

}  // namespace kforge::worker::cuda_inputs
