"""Building a problem's model and inputs at one binding of its constants, and running forward."""
from dataclasses import dataclass, field

import torch

from kforge_torch.meta_tensors import meta_factories
from kforge_torch.problem_module import load_problem

# The seed of the model's construction and of get_inputs(): a derivation is reproducible.
PROBLEM_SEED = 0


class DeriveError(Exception):
    """A problem that cannot be derived; the message says what was expected (without the file,
    which the caller adds)."""


@dataclass
class Built:
    """A problem module loaded at one binding, its model and its get_inputs() values."""
    module: object
    model: object
    inputs: list
    named: dict = field(default_factory=dict)  # {label: int} of the module's integer constants
    # Outputs for generated inputs, by (distribution, entries made |x|): each is asked for by the
    # distribution test and again by the tolerance, and a forward may take 0.1 s.
    generated_outputs: dict = field(default_factory=dict)


def check_problem(module):
    """Raises DeriveError unless `module` has the KernelBench problem interface."""
    missing = [name for name in ("Model", "get_inputs", "get_init_inputs")
               if not callable(getattr(module, name, None))]
    if missing:
        raise DeriveError(
            "not a PyTorch problem: expected a class Model (an nn.Module) and functions "
            f"get_inputs() and get_init_inputs(); missing {', '.join(missing)}")
    if not (isinstance(module.Model, type) and issubclass(module.Model, torch.nn.Module)):
        raise DeriveError(f"Model is a {type(module.Model).__name__}; expected an nn.Module class")


class ProblemCallError(Exception):
    """An exception raised by the problem's own get_init_inputs(), Model(...) or get_inputs()
    (not by forward): str() names the call, e.g. 'get_inputs() raised ValueError: ...'."""


# How a ProblemCallError's message starts (raised_text tells them from forward's).
_CALLS = ("get_init_inputs()", "Model(*get_init_inputs())", "get_inputs()")
# Values get_inputs() may not hold: a kernel's arguments are tensors and numbers.
_NOT_ARGUMENTS = (str, bytes, dict, set, frozenset)


def raised_text(reason):
    """`reason` (a short_exception text) as a user reads it: 'forward raised <reason>', or the
    reason itself when it names the problem's call that raised (get_inputs() ...)."""
    return reason if reason.startswith(_CALLS) else f"forward raised {reason}"


def _called(what, function):
    try:
        return function()
    except DeriveError:
        raise
    except Exception as error:
        raise ProblemCallError(f"{what} raised {short_exception(error)}") from error


def _argument_list(what, values, of):
    """`values` as a list; DeriveError unless a list or tuple (a tensor is not: unpacking it
    would pass its rows as arguments)."""
    if isinstance(values, torch.Tensor) or not isinstance(values, (list, tuple)):
        raise DeriveError(f"{what} returned {describe(values)}; expected a list of {of} (e.g. "
                          "[torch.randn(batch_size, dim)])")
    return list(values)


def _model_and_inputs(module):
    """Model(*get_init_inputs()) and get_inputs() of `module`, each call's failure named."""
    torch.manual_seed(PROBLEM_SEED)
    init = _argument_list("get_init_inputs()", _called("get_init_inputs()", module.get_init_inputs),
                          "the Model constructor's arguments")
    model = _called(f"Model(*get_init_inputs()) with {len(init)} argument(s)",
                    lambda: module.Model(*init))
    inputs = _argument_list("get_inputs()", _called("get_inputs()", module.get_inputs),
                            "forward's arguments")
    for index, value in enumerate(inputs):
        if isinstance(value, _NOT_ARGUMENTS):
            raise DeriveError(f"get_inputs() element {index} is {describe(value)}; expected a "
                              "tensor or a number (a kernel's arguments)")
    return model, inputs


def build(path, constants, *, meta, device="cpu", named_of=None):
    """Loads the problem with `constants` rebound, constructs Model(*get_init_inputs()) and calls
    get_inputs(), both after seeding torch with PROBLEM_SEED.

    `meta`: everything on meta tensors (shapes only, no memory: for sizes too large to make);
    else real tensors moved to `device` ("cpu" or "cuda"). `named_of(module)` gives the module's
    named integers for Built.named. Raises whatever loading raises, ProblemCallError when
    get_init_inputs(), the constructor or get_inputs() raises (it may be the binding's sizes),
    and DeriveError when they return what no binding fixes (get_inputs() returning a tensor
    instead of a list, a string argument).
    """
    if meta:
        with meta_factories():
            module = load_problem(path, constants)
            check_problem(module)
            model, inputs = _model_and_inputs(module)
    else:
        module = load_problem(path, constants)
        check_problem(module)
        model, inputs = _model_and_inputs(module)
        model = model.to(device)
        inputs = [to_device(value, device) for value in inputs]
    named = named_of(module) if named_of else {}
    return Built(module, model, inputs, named)


def to_device(value, device):
    """`value` on `device` when it is a tensor, else unchanged."""
    return value.to(device) if isinstance(value, torch.Tensor) else value


def describe(value):
    """A short description of a non-tensor value for messages: 'a dict', 'a float (3.0)'."""
    kind = type(value).__name__
    if isinstance(value, (int, float, bool)) or value is None:
        return f"a {kind} ({value!r})"
    return f"a {kind}"


def outputs_of(result):
    """The list of output tensors of a forward result (a tensor, or a tuple/list of tensors).

    Raises DeriveError naming what came back otherwise.
    """
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)) and result:
        for index, item in enumerate(result):
            if not isinstance(item, torch.Tensor):
                raise DeriveError(
                    f"forward returned a {type(result).__name__} whose element {index} is "
                    f"{describe(item)}; expected a tensor or a tuple of tensors")
        return list(result)
    raise DeriveError(f"forward returned {describe(result)}; expected a tensor or a tuple of "
                      "tensors")


def run_forward(model, inputs):
    """The output tensors of model(*inputs), without autograd. Raises what forward raises, and
    DeriveError when the result is not a tensor or tuple of tensors."""
    with torch.no_grad():
        return outputs_of(model(*inputs))


def all_finite(tensors):
    """True when no floating-point tensor in `tensors` holds an inf or a NaN."""
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point())


def short_exception(error):
    """'TypeError: message' with the message's first line (what a user needs to see); a
    ProblemCallError's own message ('get_inputs() raised TypeError: ...')."""
    if isinstance(error, ProblemCallError):
        return str(error)
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")
