"""kforge's generated inputs as torch tensors, through libkforge_inputs.so (ctypes).

A reference module must see exactly the bytes a native kernel sees for the same (seed, tensor,
distribution), so values come from kforge's own generator (src/worker/input_generator.h) behind
the C ABI of src/worker/inputs_c_api.h, never from torch's random functions.

The library is found through $KFORGE_INPUTS_LIB, else as libkforge_inputs.so next to the kforge
binary in $KFORGE_BIN_DIR.
"""

import ctypes
import os

import torch

ABI_VERSION = 2

# Numbering of DType (src/core/task.h) and InputDistribution (src/worker/host_data.h).
DTYPE_NUMBERS = {"f32": 0, "f64": 1, "f16": 2, "bf16": 3, "i32": 4, "i64": 5, "bool": 6}
DISTRIBUTION_NUMBERS = {"uniform": 0, "normal": 1, "heavy_tailed": 2, "small": 3, "pareto": 4,
                        "spike": 5}
# Numbering of InputRemap (src/worker/host_data.h): the self-test probes' index remaps.
REMAP_NUMBERS = {"none": 0, "every_16th": 1, "half_rows": 2}
TORCH_DTYPES = {
    "f32": torch.float32,
    "f64": torch.float64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i32": torch.int32,
    "i64": torch.int64,
    "bool": torch.bool,
}
ELEMENT_BYTES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i32": 4, "i64": 8, "bool": 1}
# Integer views of the same element size: bitwise comparisons and raw bytes (numpy has no bf16).
_BIT_VIEWS = {
    torch.float32: torch.int32,
    torch.float64: torch.int64,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


class InputsLibraryError(RuntimeError):
    """libkforge_inputs.so could not be found or loaded, or a fill call failed."""


def library_path():
    """Where libkforge_inputs.so is expected: $KFORGE_INPUTS_LIB, else $KFORGE_BIN_DIR/....

    Raises InputsLibraryError naming both variables when neither is set.
    """
    explicit = os.environ.get("KFORGE_INPUTS_LIB", "")
    if explicit:
        return explicit
    bin_dir = os.environ.get("KFORGE_BIN_DIR", "")
    if bin_dir:
        return os.path.join(bin_dir, "libkforge_inputs.so")
    raise InputsLibraryError(
        "cannot find libkforge_inputs.so: set KFORGE_INPUTS_LIB to its path, or KFORGE_BIN_DIR "
        "to the directory of the kforge binary it was built next to (CMake target kforge_inputs)")


_library = None


def load_library():
    """The loaded library (once per process), its ABI version checked.

    Raises InputsLibraryError saying where it looked and why loading failed.
    """
    global _library
    if _library is not None:
        return _library
    path = library_path()
    if not os.path.isfile(path):
        raise InputsLibraryError(
            "cannot find libkforge_inputs.so at %s (from %s); build CMake target kforge_inputs"
            % (path, "KFORGE_INPUTS_LIB" if os.environ.get("KFORGE_INPUTS_LIB") else
               "KFORGE_BIN_DIR"))
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise InputsLibraryError("cannot load %s: %s" % (path, e))
    lib.kforge_inputs_abi_version.restype = ctypes.c_int
    lib.kforge_inputs_abi_version.argtypes = []
    lib.kforge_fill_input_host.restype = ctypes.c_int
    lib.kforge_fill_input_host.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int,
                                           ctypes.c_uint64, ctypes.c_int, ctypes.c_int]
    lib.kforge_fill_input_host_remapped.restype = ctypes.c_int
    lib.kforge_fill_input_host_remapped.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int,
                                                    ctypes.c_uint64, ctypes.c_int, ctypes.c_int,
                                                    ctypes.c_int, ctypes.c_int64]
    lib.kforge_fill_input_device.restype = ctypes.c_int
    lib.kforge_fill_input_device.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int,
                                             ctypes.c_uint64, ctypes.c_int, ctypes.c_int,
                                             ctypes.c_void_p]
    lib.kforge_inputs_last_error.restype = ctypes.c_char_p
    lib.kforge_inputs_last_error.argtypes = []
    version = lib.kforge_inputs_abi_version()
    if version != ABI_VERSION:
        raise InputsLibraryError("%s has inputs ABI version %d; this worker needs %d"
                                 % (path, version, ABI_VERSION))
    _library = lib
    return lib


def _last_error(lib):
    text = lib.kforge_inputs_last_error()
    return text.decode("utf-8", "replace") if text else "no reason given"


def generate(dtype, shape, seed, tensor_index, distribution, device="cpu", remap="none",
             rows=1):
    """A new contiguous tensor of kforge's generated values.

    dtype: a signature dtype name ("f32", "f64", "f16", "bf16", "i32", "i64").
    shape: sequence of ints (the tensor is row-major; element e is the generator's element e).
    seed: uint64; tensor_index: the tensor's position in the signature (inputs and outputs
    counted together); distribution: a name of DISTRIBUTION_NUMBERS.
    device: "cpu", or a cuda device (filled on torch.cuda.current_stream() of that device).
    remap: a self-test probe of REMAP_NUMBERS (host_data.h, InputRemap), applied with `rows` the
    tensor's first signature dimension; remapped tensors are made on the host and uploaded.

    Raises ValueError for an unknown dtype, distribution or remap, InputsLibraryError when the
    library is missing or a fill fails.
    """
    if dtype not in DTYPE_NUMBERS:
        raise ValueError("unknown dtype %r (expected one of %s)" % (dtype, ", ".join(DTYPE_NUMBERS)))
    if distribution not in DISTRIBUTION_NUMBERS:
        raise ValueError("unknown input distribution %r (expected one of %s)"
                         % (distribution, ", ".join(DISTRIBUTION_NUMBERS)))
    if remap not in REMAP_NUMBERS:
        raise ValueError("unknown input remap %r (expected one of %s)"
                         % (remap, ", ".join(REMAP_NUMBERS)))
    lib = load_library()
    device = torch.device(device)
    shape = [int(d) for d in shape]
    tensor = torch.empty(shape, dtype=TORCH_DTYPES[dtype], device=device)
    elements = tensor.numel()
    if elements == 0:
        return tensor
    args = (ctypes.c_void_p(tensor.data_ptr()), elements, DTYPE_NUMBERS[dtype],
            ctypes.c_uint64(seed & 0xFFFFFFFFFFFFFFFF), int(tensor_index),
            DISTRIBUTION_NUMBERS[distribution])
    if remap != "none":
        host = tensor if device.type == "cpu" else torch.empty_like(tensor, device="cpu")
        args = (ctypes.c_void_p(host.data_ptr()),) + args[1:]
        if lib.kforge_fill_input_host_remapped(*args, REMAP_NUMBERS[remap], int(rows)) != 0:
            raise InputsLibraryError("kforge_fill_input_host_remapped: " + _last_error(lib))
        return host.to(device)
    if device.type == "cpu":
        if lib.kforge_fill_input_host(*args) != 0:
            raise InputsLibraryError("kforge_fill_input_host: " + _last_error(lib))
        return tensor
    with torch.cuda.device(device):
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        status = lib.kforge_fill_input_device(*args, stream)
    if status == -1 and "without CUDA" in _last_error(lib):
        # A host-only build makes the same bytes on the host: upload them.
        return generate(dtype, shape, seed, tensor_index, distribution, "cpu").to(device)
    if status != 0:
        raise InputsLibraryError("kforge_fill_input_device: " + _last_error(lib))
    return tensor


def bit_view(tensor):
    """`tensor` seen as integers of the same element size (floats' raw bits), for bitwise
    comparisons and raw bytes; integer and bool tensors are returned unchanged."""
    view_dtype = _BIT_VIEWS.get(tensor.dtype)
    return tensor.view(view_dtype) if view_dtype is not None else tensor


def raw_bytes(tensor):
    """The row-major bytes of `tensor` (copied to the host, made contiguous)."""
    host = bit_view(tensor.detach().to("cpu").contiguous())
    return host.numpy().tobytes()


# Device tensors reach a file through one pinned host buffer of this size, a chunk at a time.
WRITE_CHUNK_BYTES = 64 << 20
_pinned = None


def _pinned_buffer():
    """The pinned host buffer of WRITE_CHUNK_BYTES uint8, made on first use and kept: pinning
    costs far more than a copy, so every write of the process shares one."""
    global _pinned
    if _pinned is None or _pinned.numel() != WRITE_CHUNK_BYTES:
        _pinned = torch.empty(WRITE_CHUNK_BYTES, dtype=torch.uint8, pin_memory=True)
    return _pinned


def write_raw(tensor, out):
    """Writes the row-major bytes of `tensor` to the binary file `out`: what
    out.write(raw_bytes(tensor)) writes, without a host copy of the whole tensor.

    A host tensor is written from its own buffer; a device tensor is copied WRITE_CHUNK_BYTES at
    a time into one pinned host buffer and written chunk by chunk. A 6.4 GB output took several
    seconds more through raw_bytes (pageable copy, then a bytes copy) on the H200 machine
    (bench/torch/expected_io.py).
    """
    flat = bit_view(tensor.detach().contiguous()).reshape(-1)
    if flat.numel() == 0:
        return
    if flat.device.type == "cpu":
        out.write(memoryview(flat.numpy()).cast("B"))
        return
    data = flat.view(torch.uint8)
    total = data.numel()
    chunk = min(WRITE_CHUNK_BYTES, total)
    try:
        buffer = _pinned_buffer()
    except RuntimeError:  # no pinned memory to be had: pageable, still a chunk at a time
        buffer = torch.empty(chunk, dtype=torch.uint8)
    for start in range(0, total, chunk):
        n = min(chunk, total - start)
        buffer[:n].copy_(data[start:start + n])
        out.write(memoryview(buffer[:n].numpy()))
