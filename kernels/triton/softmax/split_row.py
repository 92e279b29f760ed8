# kforge Triton kernel: softmax over the last dim of x [rows, cols] -> y [rows, cols] for long
# rows, reading x once: each row is cut into SPLIT = cdiv(cols, CHUNK) chunks, one program per
# chunk holds its chunk in registers, and the chunks' partial (max, sum) meet in global memory.
# A program publishes its chunk's max m_i and s_i = sum exp(x - m_i), counts itself into its
# row's arrival counter, waits until all SPLIT chunks of the row have arrived, combines the
# partials as the online normalizer does (Milakov and Gimelshein, "Online normalizer calculation
# for softmax", 2018: M = max m_i, S = sum s_i exp(m_i - M)) and writes exp(x - m_i) exp(m_i - M)
# / S from the registers it kept. One launch; x read once, y written once (the two-pass
# online_row reads x twice: 64% of copy bandwidth at KernelBench 23 on an H100).
# Progress without assuming the whole grid is resident: a program's (row, chunk) is not its
# program id but a ticket it draws from a global counter when it starts, the dynamic tile index
# of single-pass scans (Merrill and Garland, "Single-pass Parallel Prefix Scan with Decoupled
# Look-back", 2016, section 4.4). Tickets go out in the order programs run, so every row but the
# newest has all its chunks held by running programs, and the newest row's waiting programs
# (at most SPLIT - 1) leave room for its missing ones whenever the device holds SPLIT programs
# at once. One program fits on every multiprocessor, so kforge_run refuses SPLIT above the
# multiprocessor count (a runtime error the gate reports, never a hang).
# Native counterpart: kernels/cuda/softmax split_row_resident (persistent grid, row tickets).
# Knobs (written above by the templates generator): KF_CHUNK (columns per program, a power of
# two), KF_BLOCK_THREADS (threads per program: num_warps = KF_BLOCK_THREADS // 32).
import torch
import triton
import triton.language as tl


@triton.jit
def _kf_split_row(x_ptr, y_ptr, counters_ptr, part_max_ptr, part_sum_ptr, cols, split,
                  x_row_stride, y_row_stride, CHUNK: tl.constexpr, SPLIT_BLOCK: tl.constexpr):
    # counters_ptr[0] hands out tickets; counters_ptr[1 + row] counts the row's arrived chunks.
    ticket = tl.atomic_add(counters_ptr, 1, sem="relaxed")
    row = ticket // split
    part = ticket - row * split
    row = row.to(tl.int64)
    index = part * CHUNK + tl.arange(0, CHUNK)
    mask = index < cols
    v = tl.load(x_ptr + row * x_row_stride + index, mask=mask, other=float("-inf"))
    v = v.to(tl.float32)
    chunk_max = tl.max(v, axis=0)
    # A chunk of only -inf keeps sum 0 (exp(-inf - -inf) would be NaN).
    shift = tl.where(chunk_max == float("-inf"), 0.0, chunk_max)
    e = tl.exp(v - shift)
    chunk_sum = tl.sum(e, axis=0)
    tl.store(part_max_ptr + row * split + part, chunk_max)
    tl.store(part_sum_ptr + row * split + part, chunk_sum)
    # Every thread's partial store precedes the release increment (made by one thread).
    tl.debug_barrier()
    arrival_ptr = counters_ptr + 1 + row
    arrived = tl.atomic_add(arrival_ptr, 1, sem="acq_rel") + 1
    while arrived < split:
        arrived = tl.atomic_add(arrival_ptr, 0, sem="acquire")
    # The mates' partials, past L1 (which is not coherent across multiprocessors).
    parts = tl.arange(0, SPLIT_BLOCK)
    part_mask = parts < split
    maxes = tl.load(part_max_ptr + row * split + parts, mask=part_mask, other=float("-inf"),
                    cache_modifier=".cg")
    sums = tl.load(part_sum_ptr + row * split + parts, mask=part_mask, other=0.0,
                   cache_modifier=".cg")
    row_max = tl.max(maxes, axis=0)
    weights = tl.where(maxes == float("-inf"), 0.0, tl.exp(maxes - row_max))
    row_sum = tl.sum(sums * weights, axis=0)
    # A chunk of only -inf gets scale 0 (row_max is finite) and so writes zeros; a row of only
    # -inf gets NaN, as torch.softmax does.
    scale = tl.exp(chunk_max - row_max) / row_sum
    tl.store(y_ptr + row * y_row_stride + index, (e * scale).to(y_ptr.dtype.element_ty),
             mask=mask)


def kforge_run(inputs, outputs, scalars):
    """x [rows, cols] -> y [rows, cols] on one CUDA device; rows must be unit-stride. ValueError
    when a row needs more programs (cdiv(cols, KF_CHUNK)) than the device has multiprocessors."""
    (x,), (y,) = inputs, outputs
    if x.dim() != 2 or y.shape != x.shape:
        raise ValueError(f"softmax kernel: expected x and y [rows, cols], got {tuple(x.shape)} "
                         f"and {tuple(y.shape)}")
    if x.stride(1) != 1 or y.stride(1) != 1:
        raise ValueError("softmax kernel: rows of x and y must be unit-stride")
    rows, cols = x.shape
    if rows == 0 or cols == 0:
        return
    split = triton.cdiv(cols, KF_CHUNK)
    multiprocessors = torch.cuda.get_device_properties(x.device).multi_processor_count
    if split > multiprocessors:
        raise ValueError(f"softmax kernel split_row: rows of {cols} columns need {split} "
                         f"programs of CHUNK {KF_CHUNK} columns at once, more than the "
                         f"{multiprocessors} multiprocessors of the device (use a larger CHUNK "
                         f"or the online_row variant)")
    if rows * split >= 2**31:
        raise ValueError(f"softmax kernel split_row: {rows} rows x {split} programs exceed the "
                         f"int32 tickets (use a larger CHUNK)")
    # SPLIT is a run-time argument, so one compiled kernel serves every row length whose SPLIT
    # pads to the same power of two (SPLIT_BLOCK, the width of the partials' load).
    counters = torch.zeros(1 + rows, dtype=torch.int32, device=x.device)
    part_max = torch.empty((rows, split), dtype=torch.float32, device=x.device)
    part_sum = torch.empty((rows, split), dtype=torch.float32, device=x.device)
    _kf_split_row[(rows * split,)](x, y, counters, part_max, part_sum, cols, split, x.stride(0),
                                   y.stride(0), CHUNK=KF_CHUNK,
                                   SPLIT_BLOCK=triton.next_power_of_2(split),
                                   num_warps=KF_BLOCK_THREADS // 32)
