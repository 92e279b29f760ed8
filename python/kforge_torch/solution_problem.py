"""The parts of a problem file a solution carries (solution.py).

A KernelBench solution file must stand alone: the harness executes it apart from the problem
file, so it cannot import `Model`. What ModelNew needs of the problem is copied as source text:

- the module-level code (imports, size constants, helper functions and classes), minus
  `class Model`, `get_inputs`, `get_init_inputs` and `if __name__ == "__main__":` blocks;
- the body of `class Model` minus `forward`: its `__init__` above all, so that ModelNew takes the
  same constructor arguments and creates the same parameters and buffers, in the same order,
  from the same random draws (KernelBench seeds the generator before building each model and
  compares their outputs, and a user's state_dict loads into it unchanged). `Model` in that text
  becomes `ModelNew` (`super(Model, self).__init__()`).

Why copy rather than re-create the parameters from the derived task: the task knows the names and
shapes of the tensors the kernel reads, not how the module initializes them, nor the tensors it
does not read (a bias the output does not depend on still belongs in the state_dict).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import List, Tuple

_LEFT_OUT = {"get_inputs", "get_init_inputs"}
# `Model` as a name, not an attribute (`nn.Model` is not ours) nor part of a longer word.
_MODEL_NAME = re.compile(r"(?<![\w.])Model\b")


@dataclass(frozen=True)
class ProblemParts:
    """`preamble`: module-level code to copy; `bases`: ModelNew's base classes as written in the
    problem ("nn.Module"); `body`: the class body without forward, indented by 4, Model renamed;
    `forward_parameters`: forward's parameter list after self as written ("x: torch.Tensor");
    `forward_arguments`: the expression of the positional arguments tuple ("(A, B)",
    "(x, *rest)")."""

    preamble: str
    bases: str
    body: str
    forward_parameters: str
    forward_arguments: str


def problem_parts(source: str, path: str) -> ProblemParts:
    """Splits the problem file's `source` (from `path`, named in errors) into ProblemParts.

    Raises ValueError naming the file when it does not parse or has no `class Model` with a
    `forward(self, ...)` method.
    """
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as e:
        raise ValueError(f"{path}: does not parse ({e.msg}, line {e.lineno})") from None
    lines = source.splitlines()
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        raise ValueError(f"{path}: no top-level `class Model` (a KernelBench problem defines one)")
    forward = next((n for n in model.body
                    if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if forward is None:
        raise ValueError(f"{path}: class Model has no forward method")
    parameters, arguments = _forward_signature(forward, path)
    body = [_segment(lines, n) for n in model.body if n is not forward]
    body_text = _MODEL_NAME.sub("ModelNew", "\n".join(body)) if body else ""
    bases = ", ".join(ast.get_source_segment(source, b) or "" for b in model.bases) or "nn.Module"
    preamble = "\n\n".join(_segment(lines, n) for n in tree.body if _kept(n, model))
    return ProblemParts(preamble, bases, body_text, parameters, arguments)


def _kept(node: ast.stmt, model: ast.ClassDef) -> bool:
    if node is model:
        return False
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _LEFT_OUT:
        return False
    if isinstance(node, ast.If) and "__name__" in ast.dump(node.test):
        return False
    return True


def _segment(lines: List[str], node: ast.stmt) -> str:
    """The node's source lines, decorators included, with their own indentation."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "\n".join(lines[first - 1:node.end_lineno])


def _forward_signature(forward: ast.FunctionDef, path: str) -> Tuple[str, str]:
    args = forward.args
    positional = args.posonlyargs + args.args
    if not positional:
        raise ValueError(f"{path}: Model.forward takes no self")
    # The parameter list as written, without self: rebuilt from the AST so that annotations
    # and defaults keep their text.
    trimmed = ast.arguments(posonlyargs=[], args=positional[1:], vararg=args.vararg,
                            kwonlyargs=args.kwonlyargs, kw_defaults=args.kw_defaults,
                            kwarg=args.kwarg, defaults=list(args.defaults))
    names = [a.arg for a in positional[1:]]
    if args.vararg is not None:
        names.append("*" + args.vararg.arg)
    tuple_text = "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"
    return ast.unparse(trimmed), tuple_text
