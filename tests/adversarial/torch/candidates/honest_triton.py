# cuda only, honest: the linear layer by torch, the row softmax as a Triton kernel.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_softmax_kernel(out_ptr, in_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    z = tl.load(in_ptr + row * cols + offsets, mask=mask, other=-float("inf"))
    e = tl.exp(z - tl.max(z, axis=0))
    tl.store(out_ptr + row * cols + offsets, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        z = torch.addmm(self.linear.bias, x, self.linear.weight.t()).contiguous()
        y = torch.empty_like(z)
        rows, cols = z.shape
        row_softmax_kernel[(rows,)](y, z, cols, BLOCK=triton.next_power_of_2(cols))
        return y
