# kforge Triton kernel: softmax over the last dim of x [rows, cols] -> y [rows, cols], one
# program per row holding the whole row (BLOCK = the next power of two >= cols) in registers:
# one read and one write of every element. Rows longer than _KF_MAX_COLS are refused (a runtime
# error the gate reports), since the row would spill.
# Knobs (written above by the templates generator): KF_BLOCK_THREADS.
import triton
import triton.language as tl

_KF_MAX_COLS = 16384


@triton.jit
def _kf_row_resident(x_ptr, y_ptr, cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    index = tl.arange(0, BLOCK)
    mask = index < cols
    v = tl.load(x_ptr + row * x_row_stride + index, mask=mask, other=float("-inf"))
    v = v.to(tl.float32)
    row_max = tl.max(v, axis=0)
    e = tl.where(mask, tl.exp(v - row_max), 0.0)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * y_row_stride + index, y.to(y_ptr.dtype.element_ty), mask=mask)


def kforge_run(inputs, outputs, scalars):
    """x [rows, cols] -> y [rows, cols] on one CUDA device; rows must be unit-stride and at
    most _KF_MAX_COLS long."""
    (x,), (y,) = inputs, outputs
    if x.dim() != 2 or y.shape != x.shape:
        raise ValueError(f"softmax kernel: expected x and y [rows, cols], got {tuple(x.shape)} "
                         f"and {tuple(y.shape)}")
    if x.stride(1) != 1 or y.stride(1) != 1:
        raise ValueError("softmax kernel: rows of x and y must be unit-stride")
    rows, cols = x.shape
    if cols > _KF_MAX_COLS:
        raise ValueError(f"softmax kernel row_resident: rows of {cols} columns exceed "
                         f"{_KF_MAX_COLS} (use the online_row variant)")
    if rows == 0 or cols == 0:
        return
    _kf_row_resident[(rows,)](x, y, cols, x.stride(0), y.stride(0),
                              BLOCK=triton.next_power_of_2(cols),
                              num_warps=KF_BLOCK_THREADS // 32)
