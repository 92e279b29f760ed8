"""The module-level size constants of a problem file, and the gate bindings tried for them.

A size constant is a top-level `NAME = <expr>` whose expression uses no other top-level name
(a derived one like `input_shape = (num_classes,)` follows its sources when they are rebound)
and whose value is an integer above 16, or a tuple of integers with an element above 16 (each
such element is a slot of its own, `input_shape_0`). Small integers (kernel_size = 3,
stride = 2, dim = 1, groups = 4) keep their values: they are hyper-parameters, not sizes.
"""
import ast
from dataclasses import dataclass

# Above this a module-level integer is taken for a size; at or below it, for a hyper-parameter
# (kernel sizes, strides, axes and group counts in KernelBench stay at or below 16).
SIZE_THRESHOLD = 16
# Small odd values for the first gate workload: odd and mostly prime so that no size is a
# multiple of a block or warp size, and distinct so that each dimension names its constant.
SMALL_VALUES = (7, 11, 13, 17, 19, 23, 29, 31, 37)
# Even smaller ones for the other constants while one constant is past a block size.
TINY_VALUES = (3, 5, 7, 9, 11, 13, 15, 17, 19)
# Past a block size (4096, 1024, 256) by one: the tail handling of blocked kernels. The smaller
# ones serve operators whose cost grows fast with the size (a 4097^3 matmul is not a quick gate).
TAIL_VALUES = (4097, 1031, 257)


@dataclass(frozen=True)
class SizeSlot:
    """One rebindable size: constant `name`, or element `index` of a tuple constant `name`."""
    name: str
    index: object  # int for a tuple element, None for an integer constant
    value: int     # the file's own value
    whole: tuple = None  # the file's own tuple, for a tuple element

    @property
    def label(self):
        """The slot's symbol: `batch_size`, or `input_shape_0` for a tuple element."""
        return self.name if self.index is None else f"{self.name}_{self.index}"


def _top_level_assignments(tree):
    """(name, value expression) for each top-level assignment to plain names, in file order."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    yield target.id, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            yield stmt.target.id, stmt.value


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def find_size_slots(tree, namespace):
    """The size slots of a parsed problem file, in file order.

    `tree` is the file's ast, `namespace` its module's globals after a plain load (for values).
    """
    assigned = {name for name, _ in _top_level_assignments(tree)}
    slots, seen = [], set()
    for name, expression in _top_level_assignments(tree):
        if name in seen:
            continue  # reassigned later: rebinding the first assignment would not stick
        seen.add(name)
        uses = {node.id for node in ast.walk(expression) if isinstance(node, ast.Name)}
        if uses & assigned:
            continue  # derived from other constants: follows them
        value = namespace.get(name)
        if _is_int(value) and value > SIZE_THRESHOLD:
            slots.append(SizeSlot(name, None, value))
        elif type(value) in (tuple, list) and all(_is_int(v) for v in value):
            slots.extend(SizeSlot(name, i, v, tuple(value))
                         for i, v in enumerate(value) if v > SIZE_THRESHOLD)
    return slots


def named_integers(tree, namespace):
    """{label: value} of every top-level integer (and integer tuple element) of a loaded module.

    Labels are those of SizeSlot (`batch_size`, `input_shape_0`); used to name dimensions after
    the constants they equal.
    """
    values = {}
    for name, _ in _top_level_assignments(tree):
        value = namespace.get(name)
        if _is_int(value):
            values[name] = value
        elif isinstance(value, (tuple, list)) and all(_is_int(v) for v in value):
            values.update({f"{name}_{i}": v for i, v in enumerate(value)})
    return values


def constants_of(slots, values):
    """The `load_problem` constants for slot values {label: int}; a tuple constant is rebuilt
    whole from its file value with its rebound elements replaced."""
    constants = {}
    for slot in slots:
        if slot.label not in values:
            continue
        if slot.index is None:
            constants[slot.name] = values[slot.label]
        else:
            current = list(constants.get(slot.name, slot.whole))
            current[slot.index] = values[slot.label]
            constants[slot.name] = tuple(current)
    return constants


def candidate_bindings(slots):
    """Gate bindings to try, best first: (kind, {label: value}) with kind "small" or "tail".

    "small": each slot a distinct small odd value, larger values to larger original sizes (a
    conv's spatial size stays above its kernel). "tail": one slot past a block size, the others
    tiny (else small). Bindings that keep ratios (for constants that must divide each other) come from
    `scaled_binding` once these fail.
    """
    if not slots:
        return []
    by_size = sorted(range(len(slots)), key=lambda i: slots[i].value)
    count = len(slots)
    pool = SMALL_VALUES if count <= len(SMALL_VALUES) else tuple(range(3, 3 + 2 * count, 2))
    chosen = pool[len(pool) - count:]
    small = {slots[i].label: chosen[rank] for rank, i in enumerate(by_size)}
    tiny = {slots[i].label: TINY_VALUES[rank % len(TINY_VALUES)] for rank, i in enumerate(by_size)}
    bindings = [("small", small), ("small", tiny)]
    for i in reversed(by_size):  # the largest original size first: the dimension kernels tile
        for tail in TAIL_VALUES:
            # Tiny others first: every size then differs from "small", so each dimension's
            # symbol shows in how it varies (and the tail gate stays cheap).
            for others in (tiny, small):
                binding = dict(others)
                binding[slots[i].label] = tail
                bindings.append(("tail", binding))
    # With one slot "tiny others" and "small others" are the same binding: each is tried once
    # (a repeat would run the same forward again, 0.5 s of CPU for a 1031^3 matmul).
    unique = []
    for kind, binding in bindings:
        if (kind, binding) not in unique:
            unique.append((kind, binding))
    return unique


def scaled_binding(slots, shift):
    """Every slot divided by 2**shift (at least 1): keeps the ratios and divisibility of sizes
    that are multiples of 2**shift, for constants that must divide each other."""
    return {slot.label: max(1, slot.value >> shift) for slot in slots}
