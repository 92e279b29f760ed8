"""Loading a PyTorch problem file with some module-level constants rebound."""
import ast
import types


def load_problem(path, constants):
    """Loads the problem file at `path` as a fresh module, with constants rebound.

    `constants` maps a top-level name to its new value: each top-level `NAME = <expr>` (also
    `NAME: T = <expr>` and one target of `a = b = <expr>`) whose name is a key gets that value
    instead of `<expr>`; everything after it (e.g. `input_shape = (num_classes,)`) follows.
    Values are written into the source as literals (their `repr`), so they must be ints, floats,
    bools, strings, or tuples/lists of them; a list becomes a tuple (JSON has no tuples, and the
    files write shapes as tuples). Returns the module; it is not put in `sys.modules`.

    Raises OSError when the file cannot be read, SyntaxError for a syntax error, and whatever
    executing the module raises (ImportError for a missing import, ...).
    """
    with open(path, "rb") as file:
        source = file.read()
    tree = ast.parse(source, filename=str(path))
    tree.body = [stmt for old in tree.body for stmt in _rebind(old, constants)]
    ast.fix_missing_locations(tree)
    module = types.ModuleType("kforge_problem")
    module.__file__ = str(path)
    exec(compile(tree, str(path), "exec"), module.__dict__)
    return module


def _literal(value, like):
    """The expression node of `value` placed where `like` was (line numbers kept for errors)."""
    if isinstance(value, list):
        value = tuple(value)
    node = ast.parse(repr(value), mode="eval").body
    return ast.copy_location(node, like)


def _rebind(stmt, constants):
    """`stmt`, or the statements that replace it when it assigns a name in `constants`."""
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        if stmt.target.id in constants and stmt.value is not None:
            stmt.value = _literal(constants[stmt.target.id], stmt.value)
        return [stmt]
    if not isinstance(stmt, ast.Assign) or not all(isinstance(t, ast.Name) for t in stmt.targets):
        return [stmt]
    names = [target.id for target in stmt.targets]
    if not any(name in constants for name in names):
        return [stmt]
    if len(names) == 1:
        stmt.value = _literal(constants[names[0]], stmt.value)
        return [stmt]
    # `height = width = 128` with only `height` rebound: evaluate the expression once, as the
    # original statement did, then bind each name to its own value.
    temporary = ast.Name(id="_kforge_rebind_value", ctx=ast.Store())
    statements = [ast.copy_location(ast.Assign(targets=[temporary], value=stmt.value), stmt)]
    for name in names:
        value = (_literal(constants[name], stmt.value) if name in constants
                 else ast.Name(id="_kforge_rebind_value", ctx=ast.Load()))
        target = ast.Name(id=name, ctx=ast.Store())
        statements.append(ast.copy_location(ast.Assign(targets=[target], value=value), stmt))
    return statements
