# kforge Triton kernel: RMSNorm over the channel dim of x [n, c, s] with no weight,
# y = x / sqrt(mean(x^2 over c) + eps); one program per (n, tile of BLOCK_S contiguous s) holds
# the whole [c, BLOCK_S] tile in registers: x is read once and y written once (column_tiles
# reads x twice, and at KernelBench 36's 7.5 GB the second read misses L2: 1.50x the minimum
# DRAM traffic on an H100). Every access is coalesced along s.
# Knobs (written above by the templates generator): KF_BLOCK_S, KF_BLOCK_THREADS (threads per
# program: num_warps = KF_BLOCK_THREADS // 32).
import triton
import triton.language as tl

# Elements of one program's tile (next power of two of c, times BLOCK_S): beyond this the tile
# no longer fits the registers of one program and the variant refuses the shape.
_KF_MAX_TILE = 32768


@triton.jit
def _kf_rms_channels_resident(x_ptr, y_ptr, c, s, eps, C_BLOCK: tl.constexpr,
                              BLOCK_S: tl.constexpr):
    batch = tl.program_id(0).to(tl.int64)
    columns = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    channels = tl.arange(0, C_BLOCK)
    mask = (channels[:, None] < c) & (columns[None, :] < s)
    offsets = batch * c * s + channels[:, None].to(tl.int64) * s + columns[None, :]
    v = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    scale = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / c + eps)
    tl.store(y_ptr + offsets, (v * scale[None, :]).to(y_ptr.dtype.element_ty), mask=mask)


def kforge_run(inputs, outputs, scalars):
    """x [n, c, s] -> y [n, c, s], both contiguous; scalars = (eps,). ValueError when the
    [c, BLOCK_S] tile exceeds _KF_MAX_TILE elements."""
    (x,), (y,) = inputs, outputs
    if x.dim() != 3 or y.shape != x.shape or not x.is_contiguous() or not y.is_contiguous():
        raise ValueError(f"rmsnorm_channels kernel: expected contiguous x and y [n, c, s], got "
                         f"{tuple(x.shape)} and {tuple(y.shape)}")
    n, c, s = x.shape
    if x.numel() == 0:
        return
    c_block = triton.next_power_of_2(c)
    if c_block * KF_BLOCK_S > _KF_MAX_TILE:
        raise ValueError(f"rmsnorm_channels kernel channel_resident: {c} channels x BLOCK_S "
                         f"{KF_BLOCK_S} exceed a tile of {_KF_MAX_TILE} elements (use the "
                         f"column_tiles variant)")
    _kf_rms_channels_resident[(n, triton.cdiv(s, KF_BLOCK_S))](
        x, y, c, s, float(scalars[0]), C_BLOCK=c_block, BLOCK_S=KF_BLOCK_S,
        num_warps=KF_BLOCK_THREADS // 32)
