#!/usr/bin/env python3
"""Writes a suite of kforge's own PyTorch problem files (KernelBench's format) for measuring what
a suite of many problems spends outside evaluation (issue 18's 100-problem target).

  suite_problems.py OUT_DIR [--count 100] [--scale cpu|gpu] [--served-share 0.75] [--seed 1]

Each file is a `Model`, module-level size constants, `get_inputs()` and `get_init_inputs()`,
written from the templates below (no KernelBench file is copied). About `--served-share` of them
compute what a built-in family computes (relu, gelu, silu, softmax, log-softmax, RMSNorm over the
last dim and over NCHW channels, LayerNorm, matrix-vector, Linear + element-wise epilogue), each
at its own shape; the rest are operators no family serves (reductions, scans, pooling, losses,
other activations), which a suite under the templates generator reports as rows with the
reference's time. Shapes: `cpu` sizes run in seconds on a 2-core machine, `gpu` sizes are tens to
hundreds of MB per input. Standard library only; the same seed writes the same files.
"""
import argparse
import pathlib
import random

HEADER = '''"""kforge suite benchmark problem {name} (bench/torch/suite_problems.py): {what}."""
import torch
import torch.nn as nn
import torch.nn.functional as F

'''

# One-input [rows, cols] problems: (file-name kind, what it computes, forward body). The served
# ones compute what a built-in family computes; the unserved ones what none does. The other
# served kinds (NCHW channels, LayerNorm, matrix-vector, Linear epilogue) have makers below.
SERVED = [
    ("relu", "ReLU of a [rows, cols] input", "return torch.relu(x)"),
    ("gelu", "GELU (erf) of a [rows, cols] input", "return F.gelu(x)"),
    ("silu", "SiLU of a [rows, cols] input", "return F.silu(x)"),
    ("softmax", "softmax over the last dim of a [rows, cols] input",
     "return torch.softmax(x, dim=-1)"),
    ("log_softmax", "log-softmax over dim 1 of a [rows, cols] input",
     "return torch.log_softmax(x, dim=1)"),
    ("rmsnorm", "RMS normalization over the last dim (eps 1e-6)",
     "return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-6)"),
]
UNSERVED = [
    ("sum", "sum over dim 1", "return torch.sum(x, dim=1, keepdim=True)"),
    ("argmax", "argmax over dim 1", "return torch.argmax(x, dim=1)"),
    ("cumsum", "cumulative sum over dim 1", "return torch.cumsum(x, dim=1)"),
    ("sigmoid", "sigmoid", "return torch.sigmoid(x)"),
    ("tanh", "tanh", "return torch.tanh(x)"),
    ("max_reduce", "max over dim 0", "return torch.max(x, dim=0)[0]"),
    ("mean", "mean over dim 1", "return torch.mean(x, dim=1)"),
    ("hardtanh", "hardtanh to [-0.5, 0.5]", "return F.hardtanh(x, min_val=-0.5, max_val=0.5)"),
    ("softplus", "softplus", "return F.softplus(x)"),
    ("frobenius", "division by the Frobenius norm", "return x / torch.norm(x, p='fro')"),
]

SIZES = {  # (rows choices, cols choices) per scale
    "cpu": ([7, 16, 33, 64, 128], [96, 257, 512, 1000, 2048]),
    "gpu": ([256, 1024, 4096, 8192], [4096, 8193, 16384, 32768]),
}


def rows_cols_problem(name, what, body, rows, cols):
    return HEADER.format(name=name, what=what) + f'''
class Model(nn.Module):
    """{what[0].upper() + what[1:]}."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        {body}


rows = {rows}
cols = {cols}


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''


def channels_problem(name, rng, scale):
    n, c = rng.choice([2, 4, 8]), rng.choice([8, 16, 32, 64])
    h, w = (rng.choice([16, 24, 31]), rng.choice([16, 40, 33])) if scale == "cpu" else \
        (rng.choice([128, 256]), rng.choice([128, 256, 255]))
    what = "RMS normalization over the channels of an NCHW input"
    return HEADER.format(name=name, what=what) + f'''
class Model(nn.Module):
    """x / sqrt(mean(x^2 over C) + eps), eps a constructor argument."""

    def __init__(self, channels, eps=1e-5):
        super().__init__()
        self.channels = channels
        self.eps = eps

    def forward(self, x):
        return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)


batch = {n}
channels = {c}
height = {h}
width = {w}


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [channels]
'''


def layernorm_problem(name, rng, scale):
    rows = rng.choice(SIZES[scale][0])
    d = rng.choice([64, 255, 512, 1024]) if scale == "cpu" else rng.choice([1024, 4096, 8192])
    what = "LayerNorm over the last dim, with its weight and bias"
    return HEADER.format(name=name, what=what) + f'''
class Model(nn.Module):
    """nn.LayerNorm over the last dim of a [rows, features] input."""

    def __init__(self, features):
        super().__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x):
        return self.ln(x)


rows = {rows}
features = {d}


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return [features]
'''


def gemv_problem(name, rng, scale):
    m = rng.choice([64, 128, 257]) if scale == "cpu" else rng.choice([2048, 4096, 8192])
    k = rng.choice([512, 1024, 2049]) if scale == "cpu" else rng.choice([8192, 16384, 32768])
    what = "a matrix times a column vector"
    return HEADER.format(name=name, what=what) + f'''
class Model(nn.Module):
    """C = A @ B for A of [m, k] and B of [k, 1]."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


m = {m}
k = {k}


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, 1)]


def get_init_inputs():
    return []
'''


def linear_epilogue_problem(name, rng, scale):
    batch = rng.choice([16, 33, 64]) if scale == "cpu" else rng.choice([512, 1024])
    fin = rng.choice([64, 128, 255]) if scale == "cpu" else rng.choice([2048, 4096])
    fout = rng.choice([64, 96, 128]) if scale == "cpu" else rng.choice([2048, 4096])
    divisor = rng.choice([2.0, 3.0])
    what = "Linear, ReLU, then division by a constant"
    return HEADER.format(name=name, what=what) + f'''
class Model(nn.Module):
    """relu(x W^T + b) / divisor."""

    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        return torch.relu(self.linear(x)) / self.divisor


batch = {batch}
in_features = {fin}
out_features = {fout}
divisor = {divisor}


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features, divisor]
'''


def write_suite(out_dir, count, scale, served_share, seed):
    rng = random.Random(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    served = round(count * served_share)
    makers = [("rmsnorm_nchw", channels_problem), ("layernorm", layernorm_problem),
              ("matvec", gemv_problem), ("linear_relu_div", linear_epilogue_problem)]
    written = []
    for i in range(count):
        name = f"{i + 1:03d}"
        if i < served:
            pick = i % (len(SERVED) + len(makers))
            if pick < len(SERVED):
                kind, what, body = SERVED[pick]
                text = rows_cols_problem(name, what, body, rng.choice(SIZES[scale][0]),
                                         rng.choice(SIZES[scale][1]))
            else:
                kind, maker = makers[pick - len(SERVED)]
                text = maker(name, rng, scale)
        else:
            kind, what, body = UNSERVED[(i - served) % len(UNSERVED)]
            text = rows_cols_problem(name, what, body, rng.choice(SIZES[scale][0]),
                                     rng.choice(SIZES[scale][1]))
        path = out_dir / f"{name}_{kind}.py"
        path.write_text(text)
        written.append(path)
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--scale", choices=sorted(SIZES), default="cpu")
    parser.add_argument("--served-share", type=float, default=0.75)
    parser.add_argument("--seed", type=int, default=1)
    a = parser.parse_args()
    paths = write_suite(pathlib.Path(a.out_dir), a.count, a.scale, a.served_share, a.seed)
    print(f"wrote {len(paths)} problem files to {a.out_dir}")


if __name__ == "__main__":
    main()
