"""What the candidate worker checks around every call of a Python candidate (`ModelNew`) that a
native kernel's worker gets from NaN poisoning and guard bands (issue 19, "Python candidates
under the same trusted evaluation").

A `ModelNew` allocates its own outputs, so poisoning them before the call proves nothing; what
does: an output must not share storage with an input, a parameter or buffer, or an output of an
earlier call (storage_span / find_alias); every call gets its inputs in new storage
(fresh_copy); and the process the harness runs in is left as it was found
(TamperWatch: the timers, the synchronize, kforge's own functions, no thread left running, the
current CUDA stream).
"""

import sys
import threading
import time

import torch

def storage_span(tensor):
    """(first byte, one past the last byte) of the storage behind `tensor`, as ints: the whole
    allocation a view shares, not only the elements the view covers. (0, 0) for an empty one."""
    if hasattr(tensor, "untyped_storage"):  # PyTorch >= 2.0
        storage = tensor.untyped_storage()
    else:  # PyTorch 1.13: the typed storage
        storage = tensor.storage()
    start = int(storage.data_ptr())
    return start, start + int(storage.nbytes())


def _overlaps(a, b):
    return a[0] < b[1] and b[0] < a[1] and a[0] != a[1] and b[0] != b[1]


def find_alias(output, owners):
    """The name of the first of `owners` ([(name, tensor)]) on `output`'s device whose storage
    overlaps `output`'s, or "" when none does."""
    span = storage_span(output)
    for name, tensor in owners:
        if tensor.device == output.device and _overlaps(span, storage_span(tensor)):
            return name
    return ""


def fresh_copy(source):
    """A new contiguous tensor equal to `source`, in storage of its own.

    Every call of a candidate gets its inputs this way, while the previous call's inputs are
    still alive (the caller holds them), so two consecutive calls never share an input address,
    and over many calls the allocator moves values between recycled addresses. A result cached
    by input address, tensor identity or version counter then either misses (the candidate
    computes) or replays another input's result, which a checked call finds."""
    copy = torch.empty_like(source, memory_format=torch.contiguous_format)
    copy.copy_(source)
    return copy


def _watched_objects():
    """[(label, namespace dict)] whose entries the candidate must leave alone: the clocks, the
    CUDA timing and synchronization entry points, the tensor methods the harness calls, and
    every kforge_torch module (and the classes defined in it)."""
    watched = [("time", vars(time)), ("threading", vars(threading)),
               ("torch.Tensor", vars(torch.Tensor)), ("torch", vars(torch))]
    if hasattr(torch, "cuda"):
        watched.append(("torch.cuda", vars(torch.cuda)))
        if hasattr(torch.cuda, "Event"):
            watched.append(("torch.cuda.Event", vars(torch.cuda.Event)))
    for name, module in sorted(sys.modules.items()):
        if module is None or not (name == "kforge_torch" or name.startswith("kforge_torch.")):
            continue
        watched.append((name, vars(module)))
        for attribute, value in list(vars(module).items()):
            if isinstance(value, type) and getattr(value, "__module__", "") == name:
                watched.append(("%s.%s" % (name, attribute), vars(value)))
    return watched


class TamperWatch:
    """A snapshot of what the harness relies on, taken before the candidate is imported, and
    the check that it is unchanged.

    Watched: the identity of every callable entry (functions, methods, classes) of `time`, `threading`, `torch`, `torch.cuda`,
    `torch.cuda.Event`, `torch.Tensor` and every kforge_torch module and class present at the
    snapshot (a candidate that reassigns time.perf_counter or torch.cuda.synchronize, or
    patches the worker's timer, is caught: the timings it would fake are measured with them);
    the Python threads alive (a thread left running after a call may write outputs later or
    burn the device while the next call is timed); on cuda, the current stream (work queued on
    another stream escapes the timing events).
    """

    def __init__(self, device):
        self._device = device
        self._entries = []
        for label, namespace in _watched_objects():
            for key, value in list(namespace.items()):
                # Callables only: data attributes (flags, caches) change in normal use.
                if callable(value) or isinstance(value, (staticmethod, classmethod)):
                    self._entries.append((label, namespace, key, value))
        self._threads = {t.ident for t in threading.enumerate()}
        self._stream = self._current_stream()

    def _current_stream(self):
        if not self._device.is_cuda:
            return None
        return torch.cuda.current_stream(self._device.index)

    def violation(self):
        """"" when everything watched is as at the snapshot, else what changed (the first
        finding), e.g. "time.perf_counter was replaced"."""
        for label, namespace, key, value in self._entries:
            now = namespace.get(key, _MISSING)
            if now is not value:
                what = "deleted" if now is _MISSING else "replaced"
                return "%s.%s was %s" % (label, key, what)
        started = [t for t in threading.enumerate()
                   if t.ident not in self._threads and t.is_alive()]
        if started:
            return "a thread it started is still running (%s)" % ", ".join(
                sorted(t.name for t in started))
        if self._stream is not None and self._current_stream() != self._stream:
            return "it left another CUDA stream current (%s)" % self._current_stream()
        return ""


_MISSING = object()
