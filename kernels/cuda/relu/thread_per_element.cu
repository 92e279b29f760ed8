// ReLU, one thread per element group: y[i] = x[i] < 0 ? 0 : x[i] over a compact tensor of any
// shape (fp32, fp16 or bf16 as KF_DTYPE says; computed in fp32). No loop: the grid covers the
// tensor; the kernel, its knobs and its tails are kernels/cuda/common/elementwise.cuh's.
#include <cuda/common/elementwise.cuh>

namespace {

// x < 0 is false for NaN, so NaN passes through, as in torch.relu.
struct Relu {
  __device__ float operator()(float v) const { return v < 0.0f ? 0.0f : v; }
};

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  return kf::run_thread_per_element<Relu>(args);
}
