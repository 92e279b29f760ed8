// The cuda backend's measurement of its device's arithmetic rate (cuda_probe.cu, nvcc): the
// measured half of "copy bandwidth and peak rate, measured once at start" (issue 3's physical
// floor); the copy bandwidth is measured in cuda_backend.cpp.
#pragma once

namespace kforge::worker::cuda_probe {

/// Measures the CUDA-core fused multiply-add rate in FLOP/s (2 per FMA) of `sm_count` SMs:
/// blocks_per_sm x sm_count blocks of 256 threads, each thread running 8 independent FMA chains
/// (enough independent work to cover the FMA latency, 4 cycles on Hopper), best of 3 runs of
/// about 10 ms each, on `stream` (a cudaStream_t). `f64` picks DFMA over FFMA. Writes the rate to
/// `*flops_per_s` and returns the CUDA error code (0 = success).
int fma_flops_per_s(void* stream, int sm_count, bool f64, double* flops_per_s);

}  // namespace kforge::worker::cuda_probe
