# kforge Triton kernel: softmax over the last dim of x [rows, cols] -> y [rows, cols], one
# program per row, two passes over BLOCK-column tiles: the online normalizer (Milakov and
# Gimelshein, "Online normalizer calculation for softmax", 2018, algorithm 3) keeps per-lane
# running (max, sum), combined at the end of the pass; the second pass writes exp(x - max) / sum.
# Knobs (written above by the templates generator): KF_BLOCK, KF_BLOCK_THREADS, KF_NUM_STAGES.
import triton
import triton.language as tl


@triton.jit
def _kf_online_row(x_ptr, y_ptr, cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr,
                   NUM_STAGES: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    offsets = tl.arange(0, BLOCK)
    lane_max = tl.full([BLOCK], float("-inf"), tl.float32)
    lane_sum = tl.zeros([BLOCK], tl.float32)
    for start in tl.range(0, cols, BLOCK, num_stages=NUM_STAGES):
        index = start + offsets
        v = tl.load(x_row + index, mask=index < cols, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(lane_max, v)
        # A lane that has seen only -inf keeps sum 0 (exp(-inf - -inf) would be NaN).
        rescale = tl.where(new_max == float("-inf"), 0.0, tl.exp(lane_max - new_max))
        term = tl.where(v == float("-inf"), 0.0, tl.exp(v - new_max))
        lane_sum = lane_sum * rescale + term
        lane_max = new_max
    row_max = tl.max(lane_max, axis=0)
    weights = tl.where(lane_max == float("-inf"), 0.0, tl.exp(lane_max - row_max))
    row_sum = tl.sum(lane_sum * weights, axis=0)
    for start in tl.range(0, cols, BLOCK, num_stages=NUM_STAGES):
        index = start + offsets
        v = tl.load(x_row + index, mask=index < cols, other=float("-inf")).to(tl.float32)
        y = tl.exp(v - row_max) / row_sum
        tl.store(y_row + index, y.to(y_ptr.dtype.element_ty), mask=index < cols)


def kforge_run(inputs, outputs, scalars):
    """x [rows, cols] -> y [rows, cols] on one CUDA device; rows must be unit-stride."""
    (x,), (y,) = inputs, outputs
    if x.dim() != 2 or y.shape != x.shape:
        raise ValueError(f"softmax kernel: expected x and y [rows, cols], got {tuple(x.shape)} "
                         f"and {tuple(y.shape)}")
    if x.stride(1) != 1 or y.stride(1) != 1:
        raise ValueError("softmax kernel: rows of x and y must be unit-stride")
    rows, cols = x.shape
    if rows == 0 or cols == 0:
        return
    _kf_online_row[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=KF_BLOCK,
                            NUM_STAGES=KF_NUM_STAGES, num_warps=KF_BLOCK_THREADS // 32)
