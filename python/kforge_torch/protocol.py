"""Worker protocol v2 (src/worker/protocol.h) on the Python side: request parsing with the C++
from_json field names and defaults, reply encoding, and the private channels.

One JSON object per line each way. Doubles that are not finite travel as "inf", "-inf", "nan".
"""

import fcntl
import json
import math
import os
import sys
import types

PROTOCOL_VERSION = 2
EXIT_HARNESS_ERROR = 1  # could not start (no device, bad fds)
EXIT_USAGE = 2          # bad command line
EXIT_DEVICE_LOST = 3    # sticky device error: the client respawns the worker
COMMANDS = ("hello", "load", "run", "time", "provide", "unload", "shutdown")
DTYPES = ("f32", "f64", "f16", "bf16", "i32", "i64", "bool")
DISTRIBUTIONS = ("uniform", "normal", "heavy_tailed", "small", "pareto", "spike")
REMAPS = ("none", "every_16th", "half_rows")  # InputRemap (src/worker/host_data.h)
BASELINES = ("eager", "compile")  # TimeRequest::baseline: the module as given, torch.compile


def parse_unload_request(request):
    """The handle of an UnloadRequest {handle: int}; raises ProtocolError when it is missing."""
    handle = request.get("handle")
    if not isinstance(handle, int) or isinstance(handle, bool):
        raise ProtocolError("unload needs field 'handle' (an integer)")
    return handle


class ProtocolError(Exception):
    """A harness error: the request is malformed or cannot be served (reply ok=false)."""


# ---------------------------------------------------------------- values


def to_wire(value):
    """`value` (dicts, lists, numbers, strings, bools, None) with non-finite floats replaced by
    "inf" / "-inf" / "nan", as the C++ number_to_json writes them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: to_wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    return value


def encode_reply(reply):
    """One reply line (no newline): compact JSON, non-finite doubles as strings, ASCII only so
    that bytes a module printed into a message can never break the line."""
    return json.dumps(to_wire(reply), separators=(",", ":"), allow_nan=False)


def _field(j, key, kind, default=None, required=False):
    if key not in j:
        if required:
            raise ProtocolError("missing field '%s'" % key)
        return default
    value = j[key]
    if kind is float:
        if isinstance(value, bool):
            raise ProtocolError("field '%s': expected a number" % key)
        if isinstance(value, (int, float)):
            return float(value)
        if value is None:
            return float("nan")
        if value in ("inf", "-inf", "nan"):
            return float(value)
        raise ProtocolError("field '%s': expected a number, got %r" % (key, value))
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ProtocolError("field '%s': expected an integer, got %r" % (key, value))
    if kind is not int and not isinstance(value, kind):
        raise ProtocolError("field '%s': expected %s, got %r" % (key, kind.__name__, value))
    return value


# ---------------------------------------------------------------- task structures


def parse_tensor(j):
    """A TensorSpec: name, role ("input"|"output"), dtype, shape (list of str), strided,
    provided (its values come from the problem, not kforge's generator)."""
    if not isinstance(j, dict):
        raise ProtocolError("a signature tensor must be an object")
    role = _field(j, "role", str, required=True)
    if role not in ("input", "output"):
        raise ProtocolError("tensor role '%s'" % role)
    dtype = _field(j, "dtype", str, required=True)
    if dtype not in DTYPES:
        raise ProtocolError("unknown dtype '%s' (expected one of %s)" % (dtype, ", ".join(DTYPES)))
    shape = _field(j, "shape", list, required=True)
    if not all(isinstance(d, str) for d in shape):
        raise ProtocolError("tensor shape entries must be strings")
    return types.SimpleNamespace(name=_field(j, "name", str, required=True), role=role,
                                 dtype=dtype, shape=shape,
                                 strided=_field(j, "strided", bool, False),
                                 provided=_field(j, "provided", bool, False))


def parse_signature(j):
    """A Signature: tensors (TensorSpec list) and scalars (name, dtype, value)."""
    if not isinstance(j, dict):
        raise ProtocolError("field 'signature': expected an object")
    tensors = [parse_tensor(t) for t in _field(j, "tensors", list, required=True)]
    scalars = [types.SimpleNamespace(name=_field(s, "name", str, required=True),
                                     dtype=_field(s, "dtype", str, required=True),
                                     value=_field(s, "value", float, required=True))
               for s in _field(j, "scalars", list, required=True)]
    return types.SimpleNamespace(tensors=tensors, scalars=scalars)


def parse_workload(j):
    """A Workload: name, dims ({symbol: int}), timed."""
    if not isinstance(j, dict):
        raise ProtocolError("field 'workload': expected an object")
    dims = _field(j, "dims", dict, required=True)
    for key, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProtocolError("workload dim '%s': expected an integer" % key)
    return types.SimpleNamespace(name=_field(j, "name", str, required=True), dims=dims,
                                 timed=_field(j, "timed", bool, False))


def bind_shape(tensor, workload):
    """The tensor's shape at `workload` as ints; ProtocolError for an unbound or non-positive
    dimension (the messages of the C++ bind_shape)."""
    shape = []
    for dim in tensor.shape:
        if dim.isdigit():
            value = int(dim)
        elif dim in workload.dims:
            value = workload.dims[dim]
        else:
            raise ProtocolError("tensor '%s': dimension '%s' is not bound by workload '%s'"
                                % (tensor.name, dim, workload.name))
        if value <= 0:
            raise ProtocolError("tensor '%s': dimension '%s' is %d in workload '%s' (expected a "
                                "positive integer)" % (tensor.name, dim, value, workload.name))
        shape.append(value)
    return shape


def format_index(flat, shape):
    """Row-major flat index `flat` in `shape` as "[i, j]"."""
    index = []
    for d in reversed(shape):
        index.append(flat % d)
        flat //= d
    return "[" + ", ".join(str(i) for i in reversed(index)) + "]"


def _distribution(j, key):
    name = _field(j, key, str, "uniform")
    if name not in DISTRIBUTIONS:
        raise ProtocolError("unknown input distribution '%s' (expected one of %s)"
                            % (name, ", ".join(DISTRIBUTIONS)))
    return name


def _remap(j):
    name = _field(j, "remap", str, "none")
    if name not in REMAPS:
        raise ProtocolError("unknown input remap '%s' (expected one of %s)"
                            % (name, ", ".join(REMAPS)))
    return name


def _common(j):
    return dict(handle=_field(j, "handle", int, required=True),
                signature=parse_signature(_field(j, "signature", dict, required=True)),
                workload=parse_workload(_field(j, "workload", dict, required=True)),
                seed=_field(j, "seed", int, 0) & 0xFFFFFFFFFFFFFFFF,
                distribution=_distribution(j, "distribution"))


def parse_run_request(j):
    """A RunRequest with the defaults of protocol.h."""
    return types.SimpleNamespace(
        calls=_field(j, "calls", int, 1), padded=_field(j, "padded", bool, False),
        output_path=_field(j, "output_path", str, required=True),
        late_write_wait_ms=_field(j, "late_write_wait_ms", float, 2.0),
        host_inputs=_field(j, "host_inputs", bool, False), remap=_remap(j),
        nvtx_range=_field(j, "nvtx_range", str, ""), digest=_field(j, "digest", bool, False),
        **_common(j))


def parse_time_request(j):
    """A TimeRequest (with its MeasurementPolicy) with the defaults of protocol.h."""
    p = _field(j, "policy", dict, {})
    policy = types.SimpleNamespace(
        warmup=_field(p, "warmup", int, 3), min_repetitions=_field(p, "min_repetitions", int, 10),
        max_repetitions=_field(p, "max_repetitions", int, 100),
        target_relative_noise=_field(p, "target_relative_noise", float, 0.005),
        max_seconds=_field(p, "max_seconds", float, 10.0))
    baseline = _field(j, "baseline", str, "eager")
    if baseline not in BASELINES:
        raise ProtocolError("unknown baseline '%s' (expected one of %s)"
                            % (baseline, ", ".join(BASELINES)))
    return types.SimpleNamespace(
        input_sets=_field(j, "input_sets", int, 2), policy=policy, baseline=baseline,
        flush_l2=_field(j, "flush_l2", bool, True),
        checks=_field(j, "checks", list, []), verified=_verified(j),
        check_path=_field(j, "check_path", str, ""), **_common(j))


def format_digest(digest):
    """A digest (int in [0, 2^64)) as protocol.cpp writes one: 16 lowercase hex digits."""
    return "%016x" % digest


def parse_digest(text):
    """The int of a digest written as hex digits (protocol.cpp's digest_to_json). ValueError
    when it is not one."""
    if isinstance(text, str) and 1 <= len(text) <= 16:
        try:
            return int(text, 16)
        except ValueError:
            pass
    raise ValueError("a digest is 1 to 16 hex digits, got %r" % (text,))


def _verified(j):
    """TimeRequest.verified as [(seed, distribution, digest int)]; ProtocolError when an entry
    is malformed."""
    found = []
    for entry in _field(j, "verified", list, []):
        if not isinstance(entry, dict):
            raise ProtocolError("field 'verified': expected objects {seed, distribution, digest}")
        try:
            digest = parse_digest(entry.get("digest"))
        except ValueError as e:
            raise ProtocolError("field 'verified': %s" % e)
        found.append((_field(entry, "seed", int, 0) & 0xFFFFFFFFFFFFFFFF,
                      _distribution(entry, "distribution"), digest))
    return found


def parse_provide_request(j):
    """A ProvideRequest: handle, signature, workload, seeds (list of uint64), dir."""
    seeds = _field(j, "seeds", list, required=True)
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ProtocolError("field 'seeds': expected a list of integers")
    return types.SimpleNamespace(
        handle=_field(j, "handle", int, required=True),
        signature=parse_signature(_field(j, "signature", dict, required=True)),
        workload=parse_workload(_field(j, "workload", dict, required=True)),
        seeds=[s & 0xFFFFFFFFFFFFFFFF for s in seeds], dir=_field(j, "dir", str, required=True))


# ---------------------------------------------------------------- channels


def take_private_channels():
    """Private copies of fds 0 and 1 for the protocol; then stdin reads /dev/null and fd 1 goes
    to stderr, so what the problem module prints can never reach the result channel.

    Returns (request_fd, response_fd). Raises OSError when the descriptors cannot be copied.
    """
    sys.stdout.flush()
    # Above 2, so that the private descriptor is never one of the standard ones it replaces.
    request_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    response_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    os.dup2(null_fd, 0)
    os.dup2(2, 1)
    os.close(null_fd)
    # sys.stdout now writes to stderr's file: line-buffer it so prints show up promptly.
    sys.stdout.reconfigure(line_buffering=True)
    return request_fd, response_fd


def read_lines(fd):
    """Yields the lines (str, without newline) read from `fd` until EOF; bytes that are not
    UTF-8 are replaced, so a bad line is answered as malformed rather than killing the loop."""
    pending = b""
    while True:
        newline = pending.find(b"\n")
        if newline >= 0:
            line, pending = pending[:newline], pending[newline + 1:]
            yield line.decode("utf-8", "replace")
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        pending += chunk


def write_line(fd, text):
    """Writes `text` + newline to `fd` completely."""
    data = (text + "\n").encode("utf-8")
    while data:
        written = os.write(fd, data)
        data = data[written:]
