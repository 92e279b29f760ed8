"""The C++/CUDA a solution builds with load_inline (solution.py): the best kernel with kforge's
headers written in, a binding that calls its kforge_run on PyTorch tensors, and the build
settings per backend.

- **Headers in.** best.cpp / best.cu include kforge's kernel ABI (<kforge/kernel.h>) and the
  built-in kernels' shared libraries (<common/...>, <cpu/common/...>, <cuda/common/...>). A
  solution must build without kforge's checkout, so every include found in kforge's include
  folders is replaced by the file's text, once (#pragma once / guards hold), recursively.
  <dlpack/dlpack.h> becomes PyTorch's own copy, <ATen/dlpack.h> (the same DLTensor layout and
  the same include guard), so nothing outside PyTorch is needed.
- **Binding.** `kforge_solution_run(inputs, outputs, scalars)` wraps each torch tensor as a
  DLTensor *view* (its data pointer, sizes and strides; no copy), fills a kforge_args and calls
  kforge_run; a non-zero return raises naming the code. On cuda it runs on PyTorch's current
  stream of the outputs' device (what KernelBench times); on cpu the stream is NULL.
- **Build settings** (BUILDS): kforge's own pinned compiler flags where PyTorch lets them
  through: cpu `-O3 -march=native -fopenmp -std=c++20` (the solution is built on the machine
  that runs it, as kforge's candidates are); cuda `-O3`, with PyTorch's
  `-D__CUDA_NO_HALF_*` macros undone (`-U`, as flash-attention and apex do) because the fp16/bf16
  kernels use the half operators, and the architecture PyTorch picks for the visible device.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
# Headers a solution takes from PyTorch instead of kforge's include folders or the system.
_FROM_TORCH = {"dlpack/dlpack.h": "<ATen/dlpack.h>"}


@dataclass(frozen=True)
class Build:
    """How one backend's kernel is built and called.

    `kernel_goes_to`: the load_inline argument the kernel source joins ("cpp_sources" with the
    binding in the same translation unit, or "cuda_sources" with the binding apart in
    cpp_sources); the flag tuples are load_inline's; `binding_includes` C++ includes of the
    binding; `device_check` a C++ condition on tensor `t` that the kernel can read it, and
    `device_words` what it says; `stream` C++ statements that set `args.stream`.
    """

    kernel_goes_to: str
    extra_cflags: Tuple[str, ...]
    extra_cuda_cflags: Tuple[str, ...]
    extra_ldflags: Tuple[str, ...]
    binding_includes: Tuple[str, ...]
    device_check: str
    device_words: str
    stream: str


# The line a kernel source that needs an architecture-specific nvcc target opens with (kforge's
# TemplatesGenerator::standalone_source writes it for family.toml's `cuda_arch`).
_TARGET = re.compile(r"^// kforge: nvcc target (sm_(\d+)a)\b", re.M)


def build_for(kernel: str, build: Build) -> Build:
    """`build` with the nvcc target `kernel` declares (e.g. wgmma needs sm_90a, which PyTorch's
    arch list does not give) added to its CUDA flags; `build` itself otherwise."""
    target = _TARGET.search(kernel)
    if target is None:
        return build
    flag = f"-gencode=arch=compute_{target.group(2)}a,code={target.group(1)}"
    return replace(build, extra_cuda_cflags=build.extra_cuda_cflags + (flag,))


BUILDS: Dict[str, Build] = {
    "cpu": Build("cpp_sources", ("-O3", "-march=native", "-fopenmp", "-std=c++20"), (),
                 ("-fopenmp",), (), "t.device().is_cpu()", "in host memory (cpu)",
                 "  args.stream = nullptr;\n"),
    "cuda": Build("cuda_sources", ("-O3",),
                  ("-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                   "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__"),
                  (), ("<ATen/cuda/CUDAContext.h>", "<c10/cuda/CUDAGuard.h>"),
                  "t.is_cuda() && t.device() == outputs.at(0).device()",
                  "on the outputs' CUDA device",
                  "  const c10::cuda::CUDAGuard guard(outputs.at(0).device());\n"
                  "  args.stream = at::cuda::getCurrentCUDAStream(outputs.at(0).get_device())"
                  ".stream();\n"),
}


def inline_includes(source: str, include_dirs: Sequence[Path], seen: Optional[Set[Path]] = None,
                    origin: Optional[Path] = None) -> str:
    """`source` with every #include of a file found in `include_dirs` (or, for "quoted" ones,
    beside `origin`) replaced by that file's text, recursively and once per file (`seen`, shared
    across calls that build one translation unit); `#pragma once` lines of inlined files are
    dropped, <dlpack/dlpack.h> becomes <ATen/dlpack.h>, other includes stay."""
    seen = set() if seen is None else seen
    out: List[str] = []
    for line in source.splitlines():
        match = _INCLUDE.match(line)
        if match is None:
            if origin is None or line.strip() != "#pragma once":
                out.append(line)
            continue
        quote, name = match.groups()
        if name in _FROM_TORCH:
            out.append(f"#include {_FROM_TORCH[name]}")
            continue
        found = _find(name, include_dirs, origin.parent if origin and quote == '"' else None)
        if found is None:
            out.append(line)
        elif found not in seen:
            seen.add(found)
            out.append(f"// ---- {name} (kforge, written in) ----")
            out.append(inline_includes(found.read_text(), include_dirs, seen, found))
            out.append(f"// ---- end of {name} ----")
    return "\n".join(out)


def _find(name: str, include_dirs: Sequence[Path], beside: Optional[Path]) -> Optional[Path]:
    for folder in ([beside] if beside is not None else []) + list(include_dirs):
        candidate = (folder / name).resolve()
        if candidate.is_file():
            return candidate
    return None


def binding_source(build: Build, kernel_label: str) -> str:
    """The C++ of `kforge_solution_run` for `build` (it includes <kforge/kernel.h>, to be
    inlined like the kernel's own includes)."""
    includes = "".join(f"#include {h}\n" for h in build.binding_includes)
    label = kernel_label.replace("\\", "\\\\").replace('"', '\\"')
    return f"""// kforge_run called on PyTorch tensors: each one handed over as a DLTensor view of its
// own memory (data pointer, sizes, strides: no copy). The outputs are allocated by forward.
#include <kforge/kernel.h>
#include <torch/extension.h>
{includes}#include <vector>

namespace kforge_solution {{

DLDataType dl_type(const at::Tensor& t) {{
  auto type = [](int code, int bits) {{
    DLDataType d;
    d.code = static_cast<uint8_t>(code);
    d.bits = static_cast<uint8_t>(bits);
    d.lanes = 1;
    return d;
  }};
  switch (t.scalar_type()) {{
    case at::kFloat: return type(kDLFloat, 32);
    case at::kDouble: return type(kDLFloat, 64);
    case at::kHalf: return type(kDLFloat, 16);
    case at::kBFloat16: return type(kDLBfloat, 16);
    case at::kInt: return type(kDLInt, 32);
    case at::kLong: return type(kDLInt, 64);
    case at::kBool: return type(kDLUInt, 8);
    default: break;
  }}
  TORCH_CHECK(false, "kforge solution: no kernel ABI type for a tensor of ", t.scalar_type());
  return type(0, 0);
}}

DLTensor view_of(const at::Tensor& t) {{
  DLTensor v;
  v.data = t.data_ptr();
  v.device.device_type = t.is_cuda() ? kDLCUDA : kDLCPU;
  v.device.device_id = t.is_cuda() ? t.get_device() : 0;
  v.ndim = static_cast<int32_t>(t.dim());
  v.dtype = dl_type(t);
  v.shape = const_cast<int64_t*>(t.sizes().data());
  v.strides = const_cast<int64_t*>(t.strides().data());
  v.byte_offset = 0;
  return v;
}}

}}  // namespace kforge_solution

void kforge_solution_run(const std::vector<at::Tensor>& inputs,
                         const std::vector<at::Tensor>& outputs,
                         const std::vector<double>& scalars) {{
  TORCH_CHECK(!outputs.empty(), "kforge solution: no output tensor");
  std::vector<DLTensor> in, out;
  for (const std::vector<at::Tensor>* list : {{&inputs, &outputs}}) {{
    for (const at::Tensor& t : *list) {{
      TORCH_CHECK({build.device_check}, "kforge solution: the kernel reads tensors "
                  "{build.device_words}; got one on ", t.device());
      (list == &inputs ? in : out).push_back(kforge_solution::view_of(t));
    }}
  }}
  kforge_args args;
  args.abi_version = KFORGE_ABI_VERSION;
  args.num_inputs = static_cast<int32_t>(in.size());
  args.inputs = in.data();
  args.num_outputs = static_cast<int32_t>(out.size());
  args.outputs = out.data();
  args.num_scalars = static_cast<int32_t>(scalars.size());
  args.scalars = scalars.data();
{build.stream}  const int code = kforge_run(&args);
  TORCH_CHECK(code == 0, "kforge kernel {label}: kforge_run returned ", code,
              " (its error codes are listed above its kforge_run)");
}}
"""


@dataclass(frozen=True)
class Sources:
    """load_inline's `cpp_sources` and `cuda_sources` (lists of strings) and the extension's
    name: `kforge_<task>_<sha256 of sources and flags, 16 hex>`, so a re-import, or another
    solution of the same kernel, reuses the build and different kernels never share one."""

    cpp: Tuple[str, ...]
    cuda: Tuple[str, ...]
    name: str


def solution_sources(kernel: str, build: Build, include_dirs: Sequence[Path], task_name: str,
                     kernel_label: str) -> Sources:
    """The load_inline sources of `kernel` (best.cpp / best.cu text) under `build`."""
    binding = binding_source(build, kernel_label)
    if build.kernel_goes_to == "cpp_sources":
        seen: Set[Path] = set()
        cpp = (inline_includes(kernel, include_dirs, seen), inline_includes(binding, include_dirs,
                                                                            seen))
        cuda: Tuple[str, ...] = ()
    else:
        cpp = (inline_includes(binding, include_dirs),)
        cuda = (inline_includes(kernel, include_dirs),)
    digest = hashlib.sha256()
    for part in cpp + ("\0",) + cuda + ("\0",) + build.extra_cflags + build.extra_cuda_cflags + \
            build.extra_ldflags:
        digest.update(part.encode() + b"\0")
    slug = re.sub(r"[^0-9A-Za-z_]", "_", task_name)[:40]
    return Sources(cpp, cuda, f"kforge_{slug}_{digest.hexdigest()[:16]}")
