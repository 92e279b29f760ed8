# kforge Triton kernel: RMSNorm over the last dim, y = x / sqrt(mean(x^2) + eps) * w, with
# x [rows, cols], w [cols], eps the signature's scalar; one program per row, two passes over
# BLOCK-column tiles (sum of squares in fp32 lanes, then the scaled writes).
# Knobs (written above by the templates generator): KF_BLOCK, KF_BLOCK_THREADS, KF_NUM_STAGES.
import triton
import triton.language as tl


@triton.jit
def _kf_rms_row_loop(x_ptr, w_ptr, y_ptr, cols, eps, x_row_stride, y_row_stride,
                     BLOCK: tl.constexpr, NUM_STAGES: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    offsets = tl.arange(0, BLOCK)
    squares = tl.zeros([BLOCK], tl.float32)
    for start in tl.range(0, cols, BLOCK, num_stages=NUM_STAGES):
        index = start + offsets
        v = tl.load(x_row + index, mask=index < cols, other=0.0).to(tl.float32)
        squares += v * v
    scale = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / cols + eps)
    for start in tl.range(0, cols, BLOCK, num_stages=NUM_STAGES):
        index = start + offsets
        mask = index < cols
        v = tl.load(x_row + index, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + index, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + index, (v * scale * w).to(y_ptr.dtype.element_ty), mask=mask)


def kforge_run(inputs, outputs, scalars):
    """x [rows, cols], w [cols] -> y [rows, cols]; scalars = (eps,); rows unit-stride."""
    (x, w), (y,) = inputs, outputs
    if x.dim() != 2 or y.shape != x.shape or tuple(w.shape) != (x.shape[1],):
        raise ValueError(f"rmsnorm kernel: expected x, y [rows, cols] and w [cols], got "
                         f"{tuple(x.shape)}, {tuple(y.shape)} and {tuple(w.shape)}")
    if x.stride(1) != 1 or y.stride(1) != 1 or not w.is_contiguous():
        raise ValueError("rmsnorm kernel: rows of x and y, and w, must be unit-stride")
    rows, cols = x.shape
    if rows == 0 or cols == 0:
        return
    _kf_rms_row_loop[(rows,)](x, w, y, cols, float(scalars[0]), x.stride(0), y.stride(0),
                              BLOCK=KF_BLOCK, NUM_STAGES=KF_NUM_STAGES,
                              num_warps=KF_BLOCK_THREADS // 32)
