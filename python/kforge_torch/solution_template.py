"""The text of a solution file (solution.py writes it): header, the problem's code, the kernel
sources and their load_inline call, the forward plan as data, a small runtime, and ModelNew.

The text avoids what KernelBench's static checker (kernel_static_checker.py) flags in the whole
file: try/except, the word it reads as an inheritance bypass, threads, streams, tensor subclasses
and torch.nn compute layers; tests run the checker on generated files.
"""

from __future__ import annotations

from typing import Sequence

from .solution_plan import Plan
from .solution_problem import ProblemParts
from .solution_source import Build, Sources

_HEADER = '''"""kforge solution for {task}: {description}

KernelBench format: `ModelNew` takes the constructor arguments of the problem's `Model` (its
constructor is copied below, so it creates the same parameters and buffers in the same order from
the same random draws) and runs kforge's best kernel in forward:

  kernel   {best} (family {family}, backend {backend}; {speedup} over the
           module in PyTorch eager, in the run)
  problem  {problem}
           (sha256 {problem_sha256})
  run      {run_dir}

The kernel is C++/CUDA, built below with torch.utils.cpp_extension.load_inline under a name
keyed by its content, so a second import reuses the build. Forward views the module's tensors in
the kernel's signature shapes (no copy for contiguous tensors) and calls it; outputs carry no
autograd history (inference only). Written by kforge (`kforge export RUN --format kernelbench`).
"""
'''

_RUNTIME = '''

def _kforge_extent(module, args, rule, dims):
    """An extent of the kernel's signature: a constant, the product of dims [first, end) of a
    forward argument (by position) or of a parameter or buffer of the module (by name), or
    ("linear", const, ((coef, symbol), ...), div): floor((const + sum of coef x extent) / div)
    over the extents in `dims` worked out before it."""
    if isinstance(rule, int):
        return rule
    if rule[0] == "linear":
        value = rule[1] + sum(coef * dims[symbol] for coef, symbol in rule[2])
        return value // rule[3] if len(rule) > 3 else value
    holder, first, end = rule
    tensor = args[holder] if isinstance(holder, int) else _kforge_attribute(module, holder)
    size = 1
    for extent in tensor.shape[first:end]:
        size *= extent
    return size


def _kforge_attribute(module, dotted):
    for name in dotted.split("."):
        module = getattr(module, name)
    return module


def _kforge_where(source, key):
    if source == "input":
        return f"forward argument {key}"
    return f"{source} {key!r}"


def _kforge_forward(module, args):
    """Allocates the outputs in the module's shapes (on the inputs' device: the signature lists
    inputs first), hands every tensor to the kernel in its signature shape, and returns the
    outputs as the module does."""
    for arg, rank in _KFORGE_RANKS:
        if not isinstance(args[arg], torch.Tensor) or args[arg].dim() != rank:
            raise ValueError(f"ModelNew: forward argument {arg} must be a tensor of rank {rank} "
                             f"(the kernel's signature is a view of it)")
    dims = {}
    for symbol, rule in _KFORGE_SYMBOLS:
        dims[symbol] = _kforge_extent(module, args, rule, dims)
    device, inputs, outputs, results = None, [], [], []
    for name, role, source, key, dtype, shape, as_is in _KFORGE_TENSORS:
        viewed = tuple(dims[e] if isinstance(e, str) else e for e in shape)
        if role == "output":
            extents = tuple(_kforge_extent(module, args, rule, dims)
                            for rule in _KFORGE_OUTPUT_SHAPES[key])
            result = torch.empty(extents, dtype=dtype, device=device)
            results.append(result)
            outputs.append(result.view(viewed))
            continue
        tensor = args[key] if source == "input" else _kforge_attribute(module, key)
        if tensor.dtype != dtype:
            raise TypeError(f"ModelNew: {_kforge_where(source, key)} ({name}) is {tensor.dtype}; "
                            f"kforge's kernel was built for {dtype}")
        count = 1
        for extent in viewed:
            count *= extent
        if tensor.numel() != count:
            raise ValueError(f"ModelNew: {_kforge_where(source, key)} ({name}) has shape "
                             f"{tuple(tensor.shape)}; the kernel reads it as {viewed}")
        inputs.append(tensor if as_is else tensor.contiguous().view(viewed))
        device = tensor.device if device is None else device
    scalars = []
    for name, source, key, value in _KFORGE_SCALARS:
        if source == "input":
            value = args[key]
        elif source == "attribute":
            value = _kforge_attribute(module, key)
        scalars.append(float(value))
    _kforge_run(inputs, outputs, scalars)
    return results[0] if len(results) == 1 else tuple(results)
'''


def render(header: dict, parts: ProblemParts, sources: Sources, build: Build, plan: Plan) -> str:
    """The whole solution file; `header` holds the docstring's fields (solution._header)."""
    text = [_HEADER.format(**header),
            "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import "
            "load_inline\n"]
    if parts.preamble.strip():
        text.append("# ---- from the problem file: its module-level code (Model, get_inputs and\n"
                    "# get_init_inputs left out)\n" + parts.preamble + "\n")
    text.append("# ---- the kernel and the binding that calls it on torch tensors\n")
    names = []
    for kind, items in (("cpp", sources.cpp), ("cuda", sources.cuda)):
        for i, item in enumerate(items):
            names.append((kind, f"_KFORGE_{kind.upper()}_SOURCE_{i}"))
            text.append(f"{names[-1][1]} = {_literal(item)}\n")
    text.append(_load_call(sources, build, names))
    text.append("_kforge_run = _kforge_kernel.kforge_solution_run\n")
    text.append(_plan_text(plan))
    text.append(_RUNTIME)
    text.append(_model_new(parts))
    return "\n".join(text)


# The line of a Triton candidate's shell that the templates generator replaces with the kernel
# module (its knobs as KF_<NAME> constants, then the variant's text, which defines kforge_run).
KERNEL_MODULE_MARKER = "# @@kforge: the kernel module goes here@@"

_TRITON_HEADER = '''"""kforge Triton candidate for {task}: {description}

KernelBench format: `ModelNew` takes the constructor arguments of the problem's `Model` (its
constructor is copied below, so it creates the same parameters and buffers in the same order from
the same random draws) and runs a Triton kernel of kforge's built-in family {family} in forward.

  problem  {problem}
           (sha256 {problem_sha256})

The kernel module below (written in by kforge's templates generator: its knobs as KF_<NAME>
constants, then the variant's source) defines `kforge_run(inputs, outputs, scalars)`, which takes
the tensors in the kernel's signature order and shapes and writes the outputs. Forward views the
module's tensors in those shapes (no copy for contiguous tensors) and calls it; outputs carry no
autograd history (inference only).
"""
'''


def render_python_kernel_shell(header: dict, parts: ProblemParts, plan: Plan) -> str:
    """A ModelNew whose kernel is a Python module (Triton): the text of render() with the
    load_inline section replaced by KERNEL_MODULE_MARKER, on a line of its own, where the kernel
    module goes, and `_kforge_run` bound to that module's `kforge_run`. `header` holds task,
    description, family, problem and problem_sha256."""
    text = [_TRITON_HEADER.format(**header),
            "import torch\nimport torch.nn as nn\n"]
    if parts.preamble.strip():
        text.append("# ---- from the problem file: its module-level code (Model, get_inputs and\n"
                    "# get_init_inputs left out)\n" + parts.preamble + "\n")
    text.append("# ---- the kernel module\n" + KERNEL_MODULE_MARKER + "\n")
    text.append("_kforge_run = kforge_run\n")
    text.append(_plan_text(plan))
    text.append(_RUNTIME)
    text.append(_model_new(parts))
    return "\n".join(text)


def _literal(source: str) -> str:
    """A Python literal of `source`: a raw triple-quoted string when that is exact."""
    for quote in ('"""', "'''"):
        if quote not in source and not source.endswith(("\\", quote[0])):
            return f"r{quote}\n{source}\n{quote}"
    return repr(source)


def _list(items: Sequence[str]) -> str:
    return "[" + ", ".join(repr(i) for i in items) + "]"


def _load_call(sources: Sources, build: Build, names) -> str:
    cpp = "[" + ", ".join(n for kind, n in names if kind == "cpp") + "]"
    cuda = "[" + ", ".join(n for kind, n in names if kind == "cuda") + "]"
    lines = ["_kforge_kernel = load_inline(", f"    name={sources.name!r},",
             f"    cpp_sources={cpp},"]
    if sources.cuda:
        lines.append(f"    cuda_sources={cuda},")
    lines += ['    functions=["kforge_solution_run"],',
              f"    extra_cflags={_list(build.extra_cflags)},"]
    if sources.cuda:
        lines.append(f"    extra_cuda_cflags={_list(build.extra_cuda_cflags)},")
    lines += [f"    extra_ldflags={_list(build.extra_ldflags)},", "    verbose=False,", ")\n"]
    return "\n".join(lines)


def _plan_text(plan: Plan) -> str:
    tensors = "".join(
        f"    ({t.name!r}, {t.role!r}, {t.source!r}, {t.key!r}, torch.{t.dtype}, "
        f"{tuple(t.shape)!r}, {t.as_is!r}),\n" for t in plan.tensors)
    scalars = "".join(f"    ({s.name!r}, {s.source!r}, {s.key!r}, {s.value!r}),\n"
                      for s in plan.scalars)
    return ("# ---- kforge_run's signature in order, and where each tensor lives in the module:\n"
            "# (name, role, source, key, dtype, signature shape, handed over with its strides)\n"
            f"_KFORGE_TENSORS = (\n{tensors})\n"
            "# (name, source, key, value): a forward argument, a module attribute or a constant\n"
            f"_KFORGE_SCALARS = (\n{scalars})\n"
            "# (forward argument, rank) of the tensor arguments the extents below index\n"
            f"_KFORGE_RANKS = {plan.ranks!r}\n"
            "# each signature symbol: a constant or (tensor, first dim, end dim), the product of\n"
            "# those dims of a forward argument (position) or a parameter or buffer (name)\n"
            f"_KFORGE_SYMBOLS = {plan.symbols!r}\n"
            "# each output's module shape, one extent per dim, by its position in the results\n"
            f"_KFORGE_OUTPUT_SHAPES = {dict(plan.output_shapes)!r}\n")


def _model_new(parts: ProblemParts) -> str:
    body = parts.body + "\n\n" if parts.body.strip() else ""
    parameters = ", ".join(p for p in ("self", parts.forward_parameters) if p)
    return (f"\n\nclass ModelNew({parts.bases}):\n{body}"
            f"    def forward({parameters}):\n"
            f"        return _kforge_forward(self, {parts.forward_arguments})\n")
