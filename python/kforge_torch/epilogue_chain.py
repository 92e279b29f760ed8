"""Reading an element-wise chain from a module's `torch.fx` graph (a hypothesis the families'
matchers then test by probing), and applying a chain in float64: the task's `epilogue` in
kernels/common/epilogue.h's vocabulary.

The forward must be one anchor module (an nn.Linear for gemm_match.py, a convolution for
conv_match.py) on its input, then element-wise ops on its result: unary activations, arithmetic
with numbers (scalars named after the model's float attributes), per-channel parameters
(channel ops), and the running value combined with a chain of itself (branch ops,
`x * torch.sigmoid(x)`).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.fx
import torch.nn.functional as F

# The families' tensor names, which no scalar or channel tensor may take.
TENSOR_NAMES = ("x", "weight", "bias", "y")
# The binary arithmetic functions a chain reads, by their epilogue op name.
ARITHMETIC = {operator.mul: "mul", torch.mul: "mul", operator.truediv: "div", torch.div: "div",
              operator.add: "add", torch.add: "add", operator.sub: "sub", torch.sub: "sub"}


@dataclass
class Chain:
    """What the graph says: the anchor submodule (the nn.Linear, or the convolution for
    conv_match.py), the ops after it (kernels/common/epilogue.h names, with their scalars' or
    channel tensors' names), each scalar's (value, origin), and each channel tensor's source."""

    anchor: str
    ops: List[str] = field(default_factory=list)
    scalars: Dict[str, Tuple[float, str]] = field(default_factory=dict)
    # Channel tensors ("add_channel:NAME"): NAME -> the parameter or buffer's dotted name, in the
    # order the chain first reads them (the kernels' last inputs).
    tensors: Dict[str, str] = field(default_factory=dict)


def _scalar_name(model: torch.nn.Module, value: float, chain: Chain, hint: str) -> str:
    """A name for a scalar of `value`: the model's float attribute holding it ("divisor"), else
    `hint` ("negative_slope"), numbered when taken; records its value and origin in `chain`."""
    origin = "a constant in forward"
    name = hint
    for prefix, module in model.named_modules():
        for attr, held in vars(module).items():
            # A scalar must not take a tensor's name (the signature's names are one namespace).
            if isinstance(held, float) and held == value and attr not in TENSOR_NAMES:
                name, origin = attr, f"attribute {prefix + '.' if prefix else ''}{attr}"
                break
        else:
            continue
        break
    base, n = name, 1
    while name in chain.scalars and chain.scalars[name][0] != value:
        n += 1
        name = f"{base}{n}"
    chain.scalars[name] = (float(value), origin)
    return name


def _describe(node) -> str:
    """"call_function truediv", "call_module linear": a node for messages."""
    return f"{node.op} {getattr(node.target, '__name__', node.target)}"


def _number(arg) -> Optional[float]:
    if isinstance(arg, bool):
        return None
    return float(arg) if isinstance(arg, (int, float)) else None


def trace_chain(model: torch.nn.Module, anchors: Tuple[type, ...] = (torch.nn.Linear,),
                what: str = "nn.Linear") -> Union[Chain, str]:
    """The Chain of `model`, or why its forward is not "one `anchors` module (named `what` in
    messages) on the input, then element-wise ops on its result". Tensor-valued operands other
    than the running value (another input, a parameter) and ops outside epilogue.h's are
    reasons."""
    try:
        graph = torch.fx.symbolic_trace(model).graph
    except Exception as error:  # data-dependent control flow and the like
        return f"forward cannot be traced by torch.fx ({type(error).__name__}: {error})"
    modules = dict(model.named_modules())
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != 1:
        return f"forward takes {len(placeholders)} arguments; a GEMM epilogue takes one input"
    chain: Optional[Chain] = None
    value: Dict[torch.fx.Node, List[str]] = {}  # node -> the chain ops that give it
    attributes: Dict[torch.fx.Node, str] = {}  # get_attr node -> dotted name
    for node in graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "get_attr":  # a parameter or buffer, read by a channel op (or a miss)
            attributes[node] = str(node.target)
            continue
        # An op whose result nothing reads can only matter by changing a tensor in place (y.relu_()
        # then y / 2), which the chain would miss, and rare enough values hide from probing.
        if node.op != "output" and not node.users:
            return f"{_describe(node)}: its result is unused (an in-place op?)"
        # An in-place op (relu_, inplace=True) is its functional twin when nothing else reads
        # the tensor it changes; otherwise a later reader sees the change the chain misses.
        in_place = node.kwargs.get("inplace") is True or (
            node.op == "call_method" and str(node.target).endswith("_")) or getattr(
            modules.get(node.target) if node.op == "call_module" else None, "inplace",
            False) is True
        operand = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else None
        if in_place and operand is not None and len(operand.users) > 1:
            return f"{_describe(node)} changes in place a tensor that another op reads too"
        if node.op == "output":
            result = node.args[0]
            if chain is None or not isinstance(result, torch.fx.Node) or result not in value:
                return f"the output is not the {what}'s result followed by element-wise ops"
            chain.ops = value[result]
            return chain
        if chain is None:
            target = modules.get(node.target) if node.op == "call_module" else None
            if isinstance(target, anchors) and node.args[0] is placeholders[0] and \
                    len(node.args) == 1 and not node.kwargs:
                chain = Chain(anchor=node.target)
                value[node] = []
                continue
            return f"the first op is {node.op} {node.target}, not an {what} on the input"
        ops = _op_of(node, modules, value, model, chain, what, attributes)
        if isinstance(ops, str):
            return ops
        value[node] = ops
    return "forward has no output"


def _channel_op(node, model, chain, value, attributes) -> Union[List[str], str, None]:
    """`node` as a channel op (v + p, p + v, v - p, v * p, p * v, v / p with p a parameter or
    buffer holding one value per output channel of the anchor), or why not, or None when
    `node` reads no attribute."""
    args = [a for a in node.args]
    read = [a for a in args if isinstance(a, torch.fx.Node) and a in attributes]
    if not read:
        return None
    what = _describe(node)
    op = ARITHMETIC.get(node.target, node.target if node.op == "call_method" else None)
    if op not in ("mul", "div", "add", "sub") or len(args) != 2 or node.kwargs or \
            args[0] is args[1]:
        return f"{what} reads parameter {attributes[read[0]]} other than as v + p, v - p, v * p " \
               f"or v / p"
    held, other = (args[0], args[1]) if args[0] in attributes else (args[1], args[0])
    if other not in value:
        return f"{what} of two tensors other than the chain's value and a parameter"
    if op in ("sub", "div") and held is args[0]:
        return f"{what} with the parameter on the left (p {op} v)"
    dotted = attributes[held]
    try:
        tensor = model.get_parameter(dotted)
    except AttributeError:
        try:
            tensor = model.get_buffer(dotted)
        except AttributeError:
            return f"{what} reads {dotted}, neither a parameter nor a buffer"
    anchor = dict(model.named_modules())[chain.anchor]
    # The output's channel dimension counted from the end: a Linear's last, a convolution's
    # [N, C, *spatial] second (its weight has 2 + spatial dims).
    from_end = 1 if isinstance(anchor, torch.nn.Linear) else anchor.weight.dim() - 1
    channels = anchor.out_features if isinstance(anchor, torch.nn.Linear) else \
        anchor.out_channels
    shape = list(tensor.shape)
    if len(shape) < from_end or shape[len(shape) - from_end] != channels or \
            any(e != 1 for i, e in enumerate(shape) if i != len(shape) - from_end):
        return f"{what} reads {dotted} of shape {shape}, not one value per output channel " \
               f"(the channel is dimension -{from_end} of the output)"
    name = dotted.replace(".", "_")
    if name in TENSOR_NAMES or name in chain.scalars:
        name = "channel_" + name
    chain.tensors.setdefault(name, dotted)
    return list(value[other]) + [f"{op}_channel:{name}"]


def _branch_op(node, value, what) -> Union[List[str], str]:
    """`v op f(v)` or `f(v) op v` (two operands, one the other's chain continued: x *
    torch.sigmoid(x), x * torch.clamp((x + 3) / 6, 0, 1)) as a branch op, or why not."""
    op = ARITHMETIC.get(node.target, node.target if node.op == "call_method" else None)
    if op not in ("mul", "div", "add", "sub") or len(node.args) != 2 or node.kwargs:
        return f"{what} of two tensors other than v op f(v) (op one of + - * /)"
    a, b = value[node.args[0]], value[node.args[1]]
    if len(a) == len(b):
        return f"{what} of two tensors other than v op f(v): neither continues the other's chain"
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    if long_[:len(short)] != short:
        return f"{what} of two tensors other than v op f(v): neither continues the other's chain"
    suffix = long_[len(short):]
    # f(v) on the left of a subtraction or division is the reversed op.
    reversed_ = long_ is a and op in ("sub", "div")
    return short + [f"{'r' if reversed_ else ''}{op}_branch({','.join(suffix)})"]


def _op_of(node, modules, value, model, chain, anchor="nn.Linear",
           attributes=None) -> Union[List[str], str]:
    """The chain that gives `node`, from the chain of its tensor operand, or why not."""
    args = list(node.args)
    channel = _channel_op(node, model, chain, value, attributes or {})
    if channel is not None:
        return channel
    tensors = [a for a in args if isinstance(a, torch.fx.Node)]
    what = _describe(node)
    if not tensors or any(t not in value for t in tensors):
        return f"{what} reads a tensor other than the {anchor}'s result"
    if node.op == "call_method" and node.target in ("clone", "detach", "contiguous"):
        return list(value[tensors[0]])
    # v * s + v (x * scale + x with x kept from before the scaling: KernelBench L2/40).
    if node.target in (operator.add, torch.add) and len(tensors) == 2:
        a, b = value[tensors[0]], value[tensors[1]]
        for scaled, kept in ((a, b), (b, a)):
            if scaled[:-1] == kept and scaled and scaled[-1].startswith("mul:"):
                return kept + ["scale_residual:" + scaled[-1].split(":", 1)[1]]
    if len(tensors) == 2:
        return _branch_op(node, value, what)
    if len(tensors) != 1:
        return f"{what} of {len(tensors)} tensors"
    base = list(value[tensors[0]])
    numbers = [_number(a) for a in args if not isinstance(a, torch.fx.Node)]
    module = modules.get(node.target) if node.op == "call_module" else None
    # A submodule's attribute name says nothing of what it computes: only its type does.
    name = node.target if node.op == "call_method" else \
        getattr(node.target, "__name__", "") if node.op == "call_function" else ""
    if name.endswith("_") and not name.startswith("_"):
        name = name[:-1]  # relu_ -> relu: allowed above only where nothing else sees the change
    unary = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "silu": "swish",
             "hardswish": "hardswish", "hardsigmoid": "hardsigmoid", "mish": "mish",
             "selu": "selu"}
    if isinstance(module, torch.nn.ReLU) or (name in unary and len(args) == 1):
        return base + [unary.get(name, "relu")]
    unary_modules = {torch.nn.Sigmoid: "sigmoid", torch.nn.Tanh: "tanh", torch.nn.SiLU: "swish",
                     torch.nn.Hardswish: "hardswish", torch.nn.Hardsigmoid: "hardsigmoid",
                     torch.nn.Mish: "mish", torch.nn.SELU: "selu"}
    if type(module) in unary_modules:
        return base + [unary_modules[type(module)]]
    if isinstance(module, torch.nn.Softplus) or name == "softplus":
        beta = module.beta if module is not None else node.kwargs.get(
            "beta", numbers[0] if numbers else 1)
        threshold = module.threshold if module is not None else node.kwargs.get(
            "threshold", numbers[1] if len(numbers) > 1 else 20)
        if beta != 1 or threshold != 20:
            return f"{what} with beta {beta}, threshold {threshold} (the epilogue's softplus " \
                   f"has beta 1, threshold 20)"
        return base + ["softplus"]
    if isinstance(module, torch.nn.ELU) or name == "elu":
        alpha = module.alpha if module is not None else node.kwargs.get(
            "alpha", numbers[0] if numbers else 1.0)
        return base + ["elu:" + _scalar_name(model, float(alpha), chain, "alpha")]
    if isinstance(module, torch.nn.GELU) or name == "gelu":
        approximate = module.approximate if module is not None else \
            node.kwargs.get("approximate", "none")
        return base + ["gelu_tanh" if approximate == "tanh" else "gelu"]
    if isinstance(module, torch.nn.LeakyReLU) or name == "leaky_relu":
        slope = module.negative_slope if module is not None else \
            node.kwargs.get("negative_slope", numbers[0] if numbers else 0.01)
        return base + ["leaky_relu:" + _scalar_name(model, float(slope), chain, "negative_slope")]
    if isinstance(module, torch.nn.Hardtanh) or name in ("clamp", "clip", "hardtanh"):
        if module is not None:
            lo, hi = module.min_val, module.max_val
        else:
            lo = node.kwargs.get("min", numbers[0] if numbers else None)
            hi = node.kwargs.get("max", numbers[1] if len(numbers) > 1 else None)
            if name == "hardtanh":
                lo, hi = node.kwargs.get("min_val", -1.0), node.kwargs.get("max_val", 1.0)
        if lo is None or hi is None:
            return f"{what} with one bound (clamp takes both here)"
        return base + ["clamp:" + _scalar_name(model, float(lo), chain, "clamp_min") + ":" +
                       _scalar_name(model, float(hi), chain, "clamp_max")]
    if node.target in ARITHMETIC or name in ("mul", "div", "add", "sub"):
        op = ARITHMETIC.get(node.target, name)
        if len(numbers) != 1 or numbers[0] is None or node.kwargs:
            return f"{what} by something other than one number"
        if op in ("div", "sub") and not isinstance(args[0], torch.fx.Node):
            return f"{what} with the tensor on the right (number {op} tensor)"
        hint = {"mul": "multiplier", "div": "divisor", "add": "addend", "sub": "subtrahend"}[op]
        return base + [f"{op}:" + _scalar_name(model, numbers[0], chain, hint)]
    return f"{what} is not an element-wise op of kernels/common/epilogue.h"


def split_branch(inner: str) -> List[str]:
    """The chain inside a branch op's parentheses, split at the commas outside parentheses."""
    chain, depth, current = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            chain.append(current)
            current = ""
            continue
        depth += 1 if ch == "(" else -1 if ch == ")" else 0
        current += ch
    return chain + [current]


def apply_chain(v: torch.Tensor, ops: Sequence[str], scalars: Dict[str, float],
                tensors: Optional[Dict[str, torch.Tensor]] = None) -> torch.Tensor:
    """The element-wise chain `ops` (epilogue.h names, "div:divisor", "add_channel:shift")
    applied to `v` in its dtype (float64 for the families' semantics), scalars by name, channel
    tensors by name (each already shaped to broadcast along v's channel dimension)."""
    for op in ops:
        if "(" in op:  # a branch op: v combined with a chain of v
            name, inner = op[:op.index("(")], op[op.index("(") + 1:-1]
            b = apply_chain(v, split_branch(inner), scalars, tensors)
            kind = name[:-len("_branch")]
            if kind == "add":
                v = v + b
            elif kind == "mul":
                v = v * b
            elif kind == "sub":
                v = v - b
            elif kind == "rsub":
                v = b - v
            elif kind == "div":
                v = v / b
            elif kind == "rdiv":
                v = b / v
            else:
                raise ValueError(f"unknown epilogue op {op!r}")
            continue
        name, *names = op.split(":")
        if name.endswith("_channel"):
            t = (tensors or {})[names[0]].to(v.dtype)
            kind = name[:-len("_channel")]
            if kind == "add":
                v = v + t
            elif kind == "sub":
                v = v - t
            elif kind == "mul":
                v = v * t
            elif kind == "div":
                v = v / t
            else:
                raise ValueError(f"unknown epilogue op {op!r}")
            continue
        s = [scalars[n] for n in names]
        if name == "relu":
            v = torch.relu(v)
        elif name == "gelu":
            v = F.gelu(v)
        elif name == "gelu_tanh":
            v = F.gelu(v, approximate="tanh")
        elif name == "sigmoid":
            v = torch.sigmoid(v)
        elif name == "tanh":
            v = torch.tanh(v)
        elif name == "swish":
            v = v * torch.sigmoid(v)
        elif name == "hardswish":
            v = F.hardswish(v)
        elif name == "hardsigmoid":
            v = F.hardsigmoid(v)
        elif name == "softplus":
            v = F.softplus(v)
        elif name == "mish":
            v = v * torch.tanh(F.softplus(v))
        elif name == "elu":
            v = torch.where(v > 0, v, s[0] * torch.expm1(v))
        elif name == "selu":
            v = F.selu(v)
        elif name == "mul":
            v = v * s[0]
        elif name == "div":
            v = v / s[0]
        elif name == "add":
            v = v + s[0]
        elif name == "sub":
            v = v - s[0]
        elif name == "leaky_relu":
            v = torch.where(v < 0, v * s[0], v)
        elif name == "scale_residual":
            v = v * s[0] + v
        elif name == "clamp":
            v = torch.clamp(v, s[0], s[1])
        else:
            raise ValueError(f"unknown epilogue op {op!r}")
    return v
