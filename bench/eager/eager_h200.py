#!/usr/bin/env python3
"""PyTorch eager on the shapes of issue 6's families, timed as kforge times kernels: cold L2
(a 2x-L2 buffer written before every call, outside the timed region), CUDA events around one
call, median of 20 after 3 warm-ups. Prints one JSON object; run on the GPU machine (it has
PyTorch). Usage: python3 bench/eager/eager_h200.py > eager.json
"""
import json
import statistics

import torch


def time_ms(fn, reps=20, warmup=3):
    flush = torch.empty(2 * 60 * 2**20 // 4, dtype=torch.float32, device="cuda")
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        flush.fill_(1.0)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop))
    return statistics.median(samples)


def main():
    torch.manual_seed(0)
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "tasks": {}}

    def record(name, shape, fn, bytes_moved):
        ms = time_ms(fn)
        results["tasks"][name] = {"shape": shape, "eager_ms": ms, "min_bytes": bytes_moved,
                                  "eager_gbps": bytes_moved / (ms * 1e-3) / 1e9}
        torch.cuda.empty_cache()

    x = torch.randn(4096, 393216, device="cuda")
    record("softmax_kernelbench", [4096, 393216], lambda: torch.softmax(x, dim=1), 2 * x.numel() * 4)
    record("log_softmax_kernelbench", [4096, 393216], lambda: torch.log_softmax(x, dim=1),
           2 * x.numel() * 4)
    del x
    x = torch.randn(4096, 8192, device="cuda")
    record("softmax_example", [4096, 8192], lambda: torch.softmax(x, dim=1), 2 * x.numel() * 4)
    del x
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
