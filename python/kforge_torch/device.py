"""The device the reference worker owns (cpu, or one cuda device): what `hello` reports, the
copy-bandwidth probe, the cache flush and the timer of `time`."""

import ctypes
import os
import statistics
import time

import torch

from kforge_torch import protocol

# L2 / last-level cache size assumed when the device does not say: the flush writes 2x this.
FALLBACK_CACHE_BYTES = 128 << 20
# A flush larger than this buys nothing and costs memory (mirrors the cpu backend's cap).
MAX_CACHE_BYTES = 1 << 30
COPY_PROBE_BYTES = 256 << 20


def _cpu_model_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"


def _last_level_cache_bytes():
    """The largest cache of cpu0 from sysfs, in bytes; 0 when unreadable."""
    best_level, best_bytes = 0, 0
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(root)
    except OSError:
        return 0
    for entry in entries:
        try:
            with open(os.path.join(root, entry, "level")) as f:
                level = int(f.read())
            with open(os.path.join(root, entry, "size")) as f:
                text = f.read().strip()
        except (OSError, ValueError):
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit() and level >= best_level:
            best_level, best_bytes = level, int(digits) * scale
    return min(best_bytes, MAX_CACHE_BYTES)


def _cuda_driver_version():
    """"major.minor" of the installed CUDA driver, or "" when libcuda cannot be asked."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
            return ""
        return "%d.%d" % (version.value // 1000, (version.value % 1000) // 10)
    except (OSError, AttributeError):
        return ""


class Device:
    """One device: backend "cpu" (index 0 only) or "cuda" (index N).

    Raises RuntimeError at construction when the device does not exist.
    """

    def __init__(self, backend, index):
        self.backend = backend
        self.index = index
        if backend == "cpu":
            if index != 0:
                raise RuntimeError("cpu backend has only device 0 (asked for %d)" % index)
            self.torch_device = torch.device("cpu")
        elif backend == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeError("cuda backend: torch sees no CUDA device")
            if index >= torch.cuda.device_count():
                raise RuntimeError("cuda backend: no device %d (torch sees %d)"
                                   % (index, torch.cuda.device_count()))
            torch.cuda.set_device(index)
            self.torch_device = torch.device("cuda", index)
        else:
            raise RuntimeError("unknown backend '%s' (expected cpu or cuda)" % backend)
        self._info = None
        self._flush_buffer = None
        self._flush_value = 0

    @property
    def is_cuda(self):
        """True for the cuda backend."""
        return self.backend == "cuda"

    def cache_bytes(self):
        """L2 (cuda) or last-level cache (cpu) size in bytes; 0 when unknown."""
        if self.is_cuda:
            props = torch.cuda.get_device_properties(self.index)
            # L2_cache_size exists only in newer torch.
            return int(getattr(props, "L2_cache_size", 0) or 0)
        return _last_level_cache_bytes()

    def info(self, measure=False):
        """The DeviceInfo of protocol.h as a dict; with `measure`, copy_bytes_per_s is measured
        once (later calls reuse it)."""
        if self._info is None:
            info = {"protocol_version": protocol.PROTOCOL_VERSION, "backend": self.backend,
                    "device_index": self.index, "compute_capability": "",
                    "l2_bytes": self.cache_bytes(), "driver_version": "",
                    "runtime_version": "torch " + torch.__version__, "copy_bytes_per_s": 0.0,
                    "peak_flops_per_s": {}, "measured_flops_per_s": {}, "sm_clock_mhz": 0}
            if self.is_cuda:
                props = torch.cuda.get_device_properties(self.index)
                info.update(name=torch.cuda.get_device_name(self.index),
                            compute_capability="%d.%d" % (props.major, props.minor),
                            multiprocessor_count=int(props.multi_processor_count),
                            memory_bytes=int(props.total_memory),
                            driver_version=_cuda_driver_version())
            else:
                info.update(name=_cpu_model_name(), multiprocessor_count=os.cpu_count() or 1,
                            memory_bytes=os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
            self._info = info
        if measure and self._info["copy_bytes_per_s"] == 0.0:
            self._info["copy_bytes_per_s"] = self.measure_copy_bytes_per_s()
        return dict(self._info)

    def measure_copy_bytes_per_s(self, nbytes=COPY_PROBE_BYTES, repetitions=5):
        """Bytes read + written per second of a device-to-device copy of `nbytes` (median of
        `repetitions`, after one warm-up copy)."""
        source = torch.ones(nbytes, dtype=torch.uint8, device=self.torch_device)
        target = torch.empty_like(source)
        target.copy_(source)
        rates = []
        for _ in range(repetitions):
            start = self.start_timer()
            target.copy_(source)
            seconds = self.stop_timer_ms(start) / 1e3
            if seconds > 0:
                rates.append(2.0 * nbytes / seconds)
        del source, target
        return statistics.median(rates) if rates else 0.0

    def synchronize(self):
        """Waits for all work on the device (cpu: nothing to wait for)."""
        if self.is_cuda:
            torch.cuda.synchronize(self.index)

    def release_cached_memory(self, limit_bytes=1 << 30):
        """Returns the blocks PyTorch's caching allocator keeps reserved but unused to the
        driver when they exceed `limit_bytes` (cuda; nothing on cpu). Called after every
        request: the reference and candidate workers share one card, and a worker that has
        made and freed gigabyte tensors (KernelBench 36's float64 reference: 15 GB a tensor)
        otherwise keeps them from the other worker, which then runs out (seen on an 80 GB H100).
        Below the limit the cache stays, so small problems keep allocating without the driver."""
        if not self.is_cuda:
            return
        unused = torch.cuda.memory_reserved(self.index) - torch.cuda.memory_allocated(self.index)
        if unused > limit_bytes:
            torch.cuda.empty_cache()

    def free_memory_bytes(self):
        """Memory still free on the device (cuda) or available on the host (cpu), bytes."""
        if self.is_cuda:
            return int(torch.cuda.mem_get_info(self.index)[0])
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")

    def flush_cache(self):
        """Writes 2x the L2 / last-level cache size (2x FALLBACK_CACHE_BYTES when unknown) with
        a new value, so the next call starts with a cold cache. Enqueued, not waited for (cuda)."""
        if self._flush_buffer is None:
            size = 2 * (self.cache_bytes() or FALLBACK_CACHE_BYTES)
            self._flush_buffer = torch.empty(size, dtype=torch.uint8, device=self.torch_device)
        # A different value each time, so the writes cannot be served from clean lines.
        self._flush_value = (self._flush_value + 1) % 256
        self._flush_buffer.fill_(self._flush_value)

    def release_flush_buffer(self):
        """Frees the flush buffer (it is made again on the next flush)."""
        self._flush_buffer = None

    def start_timer(self):
        """A timer start mark: a recorded CUDA event on the current stream, or perf_counter."""
        if self.is_cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def stop_timer_ms(self, start):
        """Milliseconds since `start` (from start_timer): CUDA event time on the current
        stream, waiting for the stop event; perf_counter on cpu."""
        if self.is_cuda:
            stop = torch.cuda.Event(enable_timing=True)
            stop.record()
            stop.synchronize()
            return float(start.elapsed_time(stop))
        return (time.perf_counter() - start) * 1e3

    def between_ms(self, first, second):
        """Milliseconds from mark `first` to mark `second` (both from start_timer, both
        completed: call after stop_timer_ms or synchronize)."""
        if self.is_cuda:
            return float(first.elapsed_time(second))
        return (second - first) * 1e3

    def device_lost(self):
        """True when the cuda device hit a sticky error (a synchronize fails)."""
        if not self.is_cuda:
            return False
        try:
            torch.cuda.synchronize(self.index)
            return False
        except RuntimeError:
            return True
