"""Load a KernelBench-format problem file as a fresh module with module-level constants rebound.

A problem file defines `class Model(nn.Module)`, size constants at module level (`batch_size =
16`), `get_inputs()` and `get_init_inputs()`. To run it at another workload, the constants are
rebound in the source before it runs: each top-level `NAME = ...` (or `NAME: T = ...`) whose
name is overridden gets the new value, so constants derived from it later in the file
(`input_shape = (num_classes,)`) follow. Each call executes the file in a fresh namespace, so two
workloads never share state.
"""

import ast
import os
import sys
import types


def _value_node(value):
    """An AST expression for a plain constant: int, float, bool, str, None, or lists / tuples /
    dicts of those."""
    if isinstance(value, (list, tuple)):
        # A list becomes a tuple: JSON (the derived task) has no tuples, and problem files write
        # shapes as tuples (`input_shape = (4096,)`), which `torch.rand(b, *shape)` needs alike.
        return ast.Tuple(elts=[_value_node(v) for v in value], ctx=ast.Load())
    if isinstance(value, dict):
        return ast.Dict(keys=[_value_node(k) for k in value],
                        values=[_value_node(v) for v in value.values()])
    if value is None or isinstance(value, (bool, int, float, str)):
        return ast.Constant(value=value)
    raise TypeError("constant value %r is not a plain int, float, bool, str, list, tuple or dict"
                    % (value,))


def _rebind(tree, constants, path):
    """Rewrites the top-level assignments of `tree` in place; raises ValueError naming the
    constants the file never assigns at top level."""
    found = set()
    body = []
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in constants for t in statement.targets):
            # `a = b = 3` with only `a` overridden: one assignment per target.
            for target in statement.targets:
                if isinstance(target, ast.Name) and target.id in constants:
                    found.add(target.id)
                    value = _value_node(constants[target.id])
                else:
                    value = statement.value
                body.append(ast.copy_location(ast.Assign(targets=[target], value=value),
                                              statement))
            continue
        if (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
                and statement.target.id in constants and statement.value is not None):
            found.add(statement.target.id)
            statement.value = _value_node(constants[statement.target.id])
        body.append(statement)
    missing = sorted(set(constants) - found)
    if missing:
        raise ValueError("%s: no top-level assignment of %s to rebind"
                         % (path, ", ".join(missing)))
    tree.body = body
    ast.fix_missing_locations(tree)


def load_problem(path, constants=None):
    """Executes the problem file at `path` as a new module and returns it.

    path: a Python source file. constants: {name: value} rebinding top-level assignments
    (values: int, float, bool, str, None, or lists/tuples/dicts of them; a list is written
    as a tuple); None or {} runs the
    file as written. The module is named after the file ("23_Softmax" for 23_Softmax.py), has
    `__file__` set, and is not put in sys.modules.

    Raises OSError when the file cannot be read, SyntaxError for invalid source, ValueError when
    an overridden name has no top-level assignment, RuntimeError when the module calls
    sys.exit() at import, and whatever the module itself raises.
    """
    path = os.path.abspath(path)
    # As `python3 FILE` does: the file's folder is importable, so a problem may import a helper
    # module that sits next to it.
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    with open(path, "rb") as f:
        source = f.read()
    tree = ast.parse(source, filename=path)
    if constants:
        _rebind(tree, constants, path)
    name = os.path.splitext(os.path.basename(path))[0]
    module = types.ModuleType(name)
    module.__file__ = path
    try:
        exec(compile(tree, path, "exec"), module.__dict__)
    except SystemExit as exit_request:  # not an Exception: it would end the caller silently
        raise RuntimeError(f"the module called sys.exit({exit_request.code!r}) while it was "
                           "imported; a problem file defines Model, get_inputs and "
                           "get_init_inputs and must not exit") from None
    return module
