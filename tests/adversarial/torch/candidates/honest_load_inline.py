# cuda only, honest: the linear layer by torch, the row softmax as inline CUDA (load_inline).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void row_softmax(const float* z, float* y, int cols) {
  const float* in = z + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  float m = -INFINITY;
  for (int c = 0; c < cols; ++c) m = fmaxf(m, in[c]);
  float s = 0.f;
  for (int c = 0; c < cols; ++c) s += expf(in[c] - m);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(in[c] - m) / s;
}

torch::Tensor row_softmax_cuda(torch::Tensor z) {
  auto y = torch::empty_like(z);
  row_softmax<<<z.size(0), 128, 0, at::cuda::getCurrentCUDAStream()>>>(
      z.data_ptr<float>(), y.data_ptr<float>(), (int)z.size(1));
  return y;
}
"""

_ext = load_inline(name="kforge_corpus_row_softmax", cpp_sources="torch::Tensor "
                   "row_softmax_cuda(torch::Tensor z);", cuda_sources=_source,
                   functions=["row_softmax_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        z = torch.addmm(self.linear.bias, x, self.linear.weight.t()).contiguous()
        return _ext.row_softmax_cuda(z)
