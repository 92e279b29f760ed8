// GELU (erf form), grid-stride: y[i] = 0.5 x[i] (1 + erf(x[i] / sqrt(2))) over a compact tensor
// of any shape (torch.nn.functional.gelu, approximate='none'; fp32, fp16 or bf16 as KF_DTYPE
// says, computed in fp32). About one wave of blocks loops over the tensor; the kernel, its knobs
// and its tails are kernels/cuda/common/elementwise.cuh's.
#include <cuda/common/elementwise.cuh>

namespace {

// The exact (erf) GELU of F.gelu's default, as PyTorch's own kernel computes it.
struct Gelu {
  __device__ float operator()(float v) const {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
};

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) { return kf::run_grid_stride<Gelu>(args); }
