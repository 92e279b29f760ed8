# kforge Triton kernel: ReLU element-wise over x [rows, cols] -> y, the tensor as one flat
# range of BLOCK-element programs (64-bit offsets: KernelBench's 1.6 G elements pass 2^31).
# Knobs (written above by the templates generator): KF_BLOCK, KF_BLOCK_THREADS.
import triton
import triton.language as tl


@triton.jit
def _kf_relu_blocks(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    index = start + tl.arange(0, BLOCK)
    mask = index < n
    v = tl.load(x_ptr + index, mask=mask, other=0.0)
    tl.store(y_ptr + index, tl.maximum(v, 0.0).to(y_ptr.dtype.element_ty), mask=mask)


def kforge_run(inputs, outputs, scalars):
    """x [rows, cols] -> y [rows, cols], both contiguous, on one CUDA device."""
    (x,), (y,) = inputs, outputs
    if y.shape != x.shape or not x.is_contiguous() or not y.is_contiguous():
        raise ValueError(f"relu kernel: expected contiguous x and y of one shape, got "
                         f"{tuple(x.shape)} and {tuple(y.shape)}")
    n = x.numel()
    if n == 0:
        return
    _kf_relu_blocks[(triton.cdiv(n, KF_BLOCK),)](x, y, n, BLOCK=KF_BLOCK,
                                                 num_warps=KF_BLOCK_THREADS // 32)
