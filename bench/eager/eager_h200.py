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
    # LLM inference: softmax over attention scores, batch 32 x 32 heads x 2048 x 2048, last dim.
    x = torch.randn(32, 32, 2048, 2048, device="cuda")
    record("softmax_attention", [32, 32, 2048, 2048], lambda: torch.softmax(x, dim=-1),
           2 * x.numel() * 4)
    del x
    # KernelBench level1 19: ReLU over the same 4096 x 393216 tensor.
    x = torch.randn(4096, 393216, device="cuda")
    record("relu_kernelbench", [4096, 393216], lambda: torch.relu(x), 2 * x.numel() * 4)
    # KernelBench level1 26: GELU (erf form, F.gelu's default) over the same shape.
    record("gelu_kernelbench", [4096, 393216], lambda: torch.nn.functional.gelu(x),
           2 * x.numel() * 4)
    # KernelBench level1 25: Swish, written there as x * torch.sigmoid(x) (two kernels).
    record("silu_kernelbench", [4096, 393216], lambda: x * torch.sigmoid(x), 2 * x.numel() * 4)
    del x
    # KernelBench level1 36: RMSNorm over dim 1 (C) of NCHW, x / sqrt(mean(x^2, dim=1) + 1e-5).
    x = torch.randn(112, 64, 512, 512, device="cuda")
    record("rmsnorm_channels_kernelbench", [112, 64, 512, 512],
           lambda: x / torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + 1e-5),
           2 * x.numel() * 4)
    del x
    # KernelBench level1 40: LayerNorm over the last three dims (elementwise affine).
    x = torch.randn(16, 64, 256, 256, device="cuda")
    ln = torch.nn.LayerNorm((64, 256, 256)).cuda()
    with torch.no_grad():
        record("layernorm_kernelbench", [16, 64, 256, 256], lambda: ln(x),
               (2 * x.numel() + 2 * ln.weight.numel()) * 4)
    del x, ln
    # LLM inference RMSNorm (last dim, weighted) and LayerNorm at 8192 x 4096.
    x = torch.randn(8192, 4096, device="cuda")
    w = torch.randn(4096, device="cuda")
    record("rmsnorm_llm", [8192, 4096],
           lambda: x * torch.rsqrt(torch.mean(x * x, dim=1, keepdim=True) + 1e-6) * w,
           (2 * x.numel() + w.numel()) * 4)
    record("layernorm_llm", [8192, 4096],
           lambda: torch.nn.functional.layer_norm(x, (4096,), w, w, 1e-5),
           (2 * x.numel() + 2 * w.numel()) * 4)
    del x, w
    # KernelBench level1 4: matrix-vector, A 2048 x 1048576 times x; and A^T y.
    a = torch.randn(2048, 1048576, device="cuda")
    v = torch.randn(1048576, 1, device="cuda")
    u = torch.randn(2048, 1, device="cuda")
    record("gemv_kernelbench", [2048, 1048576], lambda: torch.matmul(a, v),
           (a.numel() + v.numel() + u.numel()) * 4)
    record("gemv_t_kernelbench", [2048, 1048576], lambda: torch.matmul(a.t(), u),
           (a.numel() + v.numel() + u.numel()) * 4)
    del a, v, u
    # KernelBench level1 97: F.scaled_dot_product_attention, Q, K, V [32, 32, 512, 1024] (issue 20;
    # bench/tasks/attention_kernelbench), and examples/attention's timed [16, 256, 64].
    for name, shape in (("attention_kernelbench", [32, 32, 512, 1024]),
                        ("attention_example", [16, 256, 64])):
        q, k, v = (torch.rand(*shape, device="cuda") for _ in range(3))
        record(name, shape, lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v),
               4 * q.numel() * 4)
        del q, k, v
    # The bundled examples' timed workloads that have no KernelBench counterpart: log-probabilities
    # over a 32K vocabulary, and the fp16/bf16 tasks (2 bytes per element; weights in the same
    # type, as the tasks declare them).
    x = torch.randn(1024, 32000, device="cuda")
    record("log_softmax_example", [1024, 32000], lambda: torch.log_softmax(x, dim=1),
           2 * x.numel() * 4)
    xb = x.to(torch.bfloat16)
    record("log_softmax_bf16_example", [1024, 32000], lambda: torch.log_softmax(xb, dim=1),
           2 * xb.numel() * 2)
    del x, xb
    x = torch.randn(4096, 8192, device="cuda", dtype=torch.float16)
    record("softmax_f16_example", [4096, 8192], lambda: torch.softmax(x, dim=1), 2 * x.numel() * 2)
    record("silu_f16_example", [4096, 8192], lambda: torch.nn.functional.silu(x), 2 * x.numel() * 2)
    xb = x.to(torch.bfloat16)
    record("gelu_bf16_example", [4096, 8192], lambda: torch.nn.functional.gelu(xb),
           2 * xb.numel() * 2)
    del x, xb
    x = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    record("rmsnorm_bf16_llm", [8192, 4096],
           lambda: torch.nn.functional.rms_norm(x, (4096,), w, 1e-5), (2 * x.numel() + w.numel()) * 2)
    record("layernorm_bf16_llm", [8192, 4096],
           lambda: torch.nn.functional.layer_norm(x, (4096,), w, w, 1e-5),
           (2 * x.numel() + 2 * w.numel()) * 2)
    del x, w
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
