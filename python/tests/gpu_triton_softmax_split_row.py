"""GPU self-check of the Triton softmax variant split_row (kernels/triton/softmax/split_row.py).

For every (CHUNK, BLOCK_THREADS) of the variant's lists in family.toml, the module is written as
the templates generator writes it (a marker line, the knobs as KF_<NAME> constants, then the
variant's text), imported from a file (Triton reads its kernels' source back) and run against
torch.softmax: small and ragged shapes, fp16 and bf16, rows with -inf, a row too long for the
device (which must be refused with ValueError), and KernelBench 23's 4096 x 393216 fp32, timed
with CUDA events (median of 20 after warm-up) beside torch.softmax and a plain copy (the 100%
of bandwidth): GB/s = 2 * rows * cols * 4 / time. One line per case; exit 1 on any mismatch
(atol = rtol = 1e-5 for fp32, 1e-2 for fp16/bf16) or unexpected error. Without CUDA it prints
"skipped: no CUDA" and exits 0. A kernel that hangs means the ticket argument failed: run it
under a time limit.

  python3 python/tests/gpu_triton_softmax_split_row.py [--skip-large]
"""

from __future__ import annotations

import importlib.util
import pathlib
import statistics
import sys
import tempfile
import tomllib

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAMILY = ROOT / "kernels" / "triton" / "softmax"
TOLERANCE = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}
KERNELBENCH_23 = (4096, 393216)
TIMED_RUNS = 20


def variant_params() -> dict:
    spec = tomllib.loads((FAMILY / "family.toml").read_text())
    variant = next(v for v in spec["variants"] if v["name"] == "split_row")
    return variant["params"]


def load_module(folder: pathlib.Path, knobs: dict):
    """The variant module as the templates generator writes it (knobs in name order, as its
    std::map holds them), imported from a file in `folder`."""
    point = "_".join(f"{name}{value}" for name, value in sorted(knobs.items()))
    text = (f"# kernels/triton/softmax/split_row.py at {point}\n" +
            "".join(f"KF_{name} = {value}\n" for name, value in sorted(knobs.items())) +
            (FAMILY / "split_row.py").read_text())
    path = folder / f"kf_split_row_{point}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(module, x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    module.kforge_run((x,), (y,), ())
    return y


def matches(y: torch.Tensor, x: torch.Tensor, rows_per_check: int = 256) -> tuple[bool, float]:
    """Whether y is torch.softmax(x) within the dtype's tolerance, and the largest error; row
    blocks at a time so that KernelBench 23 needs no full-size temporaries."""
    tolerance = TOLERANCE[x.dtype]
    ok, worst = True, 0.0
    for start in range(0, x.shape[0], rows_per_check):
        expected = torch.softmax(x[start:start + rows_per_check], dim=-1).float()
        got = y[start:start + rows_per_check].float()
        ok = ok and torch.allclose(got, expected, atol=tolerance, rtol=tolerance)
        worst = max(worst, (got - expected).abs().max().item())
    return ok, worst


def inf_rows(device: str) -> torch.Tensor:
    """Row 0: -inf but for one finite value; row 1: its first 9000 columns -inf (whole chunks of
    -inf for CHUNK up to 8192); row 2: plain; row 3: large negative values only."""
    x = torch.randn(4, 20000, device=device)
    x[0] = float("-inf")
    x[0, 12345] = 3.0
    x[1, :9000] = float("-inf")
    x[3] = x[3] - 200.0
    return x


def check(name: str, module, x: torch.Tensor, multiprocessors: int, chunk: int) -> bool:
    split = -(-x.shape[1] // chunk)
    if split > multiprocessors:
        try:
            run(module, x)
        except ValueError as error:
            print(f"ok    {name}: refused as expected ({error})")
            return True
        print(f"FAIL  {name}: SPLIT {split} > {multiprocessors} multiprocessors was not refused")
        return False
    ok, worst = matches(run(module, x), x)
    print(f"{'ok  ' if ok else 'FAIL'}  {name}: max abs error {worst:.3g}")
    return ok


def median_ms(call) -> float:
    for _ in range(3):
        call()
    times = []
    for _ in range(TIMED_RUNS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def bandwidth_line(name: str, ms: float, bytes_moved: int, copy_ms: float) -> str:
    return (f"time  {name}: {ms:.3f} ms, {bytes_moved / ms / 1e6:.0f} GB/s, "
            f"{100 * copy_ms / ms:.0f}% of copy")


def main() -> int:
    if not torch.cuda.is_available():
        print("skipped: no CUDA")
        return 0
    import triton
    device = "cuda"
    properties = torch.cuda.get_device_properties(0)
    multiprocessors = properties.multi_processor_count
    print(f"device {properties.name}, {multiprocessors} multiprocessors; torch {torch.__version__}"
          f", triton {triton.__version__}")
    params = variant_params()
    torch.manual_seed(0)
    small = [("f32 3x1000", torch.randn(3, 1000, device=device)),
             ("f32 1x1", torch.randn(1, 1, device=device)),
             ("f32 7x24581", torch.randn(7, 8192 * 3 + 5, device=device)),
             ("f32 64x65536", torch.randn(64, 65536, device=device)),
             ("f16 16x50000", torch.randn(16, 50000, device=device, dtype=torch.float16)),
             ("bf16 16x50000", torch.randn(16, 50000, device=device, dtype=torch.bfloat16)),
             ("f32 -inf rows 4x20000", inf_rows(device))]
    large = None
    copy_ms = 0.0
    if "--skip-large" not in sys.argv:
        rows, cols = KERNELBENCH_23
        large = torch.randn(rows, cols, device=device)
        bytes_moved = 2 * large.numel() * large.element_size()
        scratch = torch.empty_like(large)
        copy_ms = median_ms(lambda: scratch.copy_(large))
        print(bandwidth_line("copy f32 4096x393216", copy_ms, bytes_moved, copy_ms))
        torch_ms = median_ms(lambda: torch.softmax(large, dim=-1))
        print(bandwidth_line("torch.softmax f32 4096x393216", torch_ms, bytes_moved, copy_ms))
        del scratch
    failures = 0
    with tempfile.TemporaryDirectory() as folder:
        for chunk in params["CHUNK"]:
            for threads in params["BLOCK_THREADS"]:
                module = load_module(pathlib.Path(folder),
                                     {"CHUNK": chunk, "BLOCK_THREADS": threads})
                point = f"CHUNK={chunk} BLOCK_THREADS={threads}"
                for name, x in small:
                    failures += not check(f"{point} {name}", module, x, multiprocessors, chunk)
                too_long = torch.randn(1, chunk * (multiprocessors + 1), device=device)
                failures += not check(f"{point} f32 1x{too_long.shape[1]}", module, too_long,
                                      multiprocessors, chunk)
                if large is None:
                    continue
                name = f"{point} f32 4096x393216"
                if not check(name, module, large, multiprocessors, chunk):
                    failures += 1
                    continue
                if -(-large.shape[1] // chunk) <= multiprocessors:
                    ms = median_ms(lambda: run(module, large))
                    print(bandwidth_line(name, ms, bytes_moved, copy_ms))
    print(f"{'all cases passed' if failures == 0 else f'{failures} case(s) failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
