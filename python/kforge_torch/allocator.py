"""Allocator settings for derivation processes (`derive`, `derive --batch`).

A derivation makes and frees the same few large tensors (gate workloads of up to 2^22 elements,
their float64 copies, family probes) hundreds of times. glibc's malloc serves blocks above its
mmap threshold (128 KiB at start, raised on the fly) with fresh mmap'ed pages and gives them back
on free, so every such tensor page-faults its memory in again: on KernelBench 33 (BatchNorm)
that was 1 to 2 s of a 2.5 to 4 s derivation on the 2-core host, and it varied with the order of
allocations. Fixing the thresholds keeps freed blocks for reuse.
"""
import ctypes

# mallopt parameters (glibc malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
# glibc's largest mmap threshold on 64-bit hosts (DEFAULT_MMAP_THRESHOLD_MAX): a float64 copy of
# the largest gate tensor (2^22 elements) still comes from the heap.
MMAP_THRESHOLD_BYTES = 32 << 20
# Freed memory at the top of the heap is returned to the system only past this: a derivation's
# working set stays, and a problem's child returns everything when it exits anyway.
TRIM_THRESHOLD_BYTES = 256 << 20


def reuse_freed_memory():
    """Sets glibc's mmap and trim thresholds for this process (and the children it forks).

    Returns True when both were set, False where the C library has no mallopt (not glibc) or
    refuses a value; the derivation is the same either way, only slower.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and \
        bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
