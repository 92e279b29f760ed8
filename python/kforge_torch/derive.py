"""Deriving a kforge task (docs/torch_tasks.md, "The derived task") from a PyTorch problem file."""
import ast
import contextlib
import copy
import hashlib
import os
import sys

import torch

from kforge_torch import derive_values, input_rules, signature_entries, size_constants
from kforge_torch.derive_problem import problem_shapes
from kforge_torch.derive_tolerance import double_reference, tensor_core_ops, tolerance_of
from kforge_torch.gate_search import find_gates
from kforge_torch.meta_tensors import meta_factories
from kforge_torch.problem_module import load_problem
from kforge_torch.problem_run import DeriveError, check_problem, run_forward, short_exception
from kforge_torch.symbols import name_dimensions

FORMAT, VERSION = "kforge-torch-task", 1


def derive(path, options=None, match_family=None):
    """The derived task JSON (a dict, docs/torch_tasks.md) of the problem file at `path`.

    options: {"device": "cpu" | "cuda" (where gate forwards run; default "cpu"),
              "generate": f(shape, torch dtype, seed, tensor_index, distribution) -> CPU tensor
              (default derive_values.generate)}.
    match_family: None, or f(derived dict, instances) called on the result, where instances is
    [(gate workload name, model, inputs list)] built at the gate workloads; it returns the dict
    to use (or None to keep the one it was given, possibly modified in place).
    The problem's own sizes are never made on the host: their shapes come from meta tensors.
    The module's prints go to stderr. Raises DeriveError("FILE: what was expected") for a file
    that cannot be derived; `family` is "" and `family_match` null unless match_family sets them.
    """
    options = dict(options or {})
    path = os.path.abspath(str(path))
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return _derive(path, options, match_family)
    except DeriveError as error:
        raise DeriveError(f"{path}: {error}") from None


def _read_and_load(path):
    """(source bytes, ast, module loaded with its own constants on meta tensors)."""
    try:
        with open(path, "rb") as file:
            source = file.read()
    except OSError as error:
        raise DeriveError(f"cannot read the file ({error.strerror})") from None
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as error:
        raise DeriveError(f"line {error.lineno}: syntax error: {error.msg}; expected a Python "
                          "module") from None
    try:
        # Meta tensors: a module that makes tensors at import makes no memory here.
        with meta_factories():
            module = load_problem(path, {})
    except ModuleNotFoundError as error:
        raise DeriveError(f"imports '{error.name}', which is not installed on this machine"
                          ) from None
    except Exception as error:
        raise DeriveError(f"loading the module raised {short_exception(error)}") from None
    check_problem(module)
    return source, tree, module


def _derive(path, options, match_family):
    device = options.get("device", "cpu")
    generate = options.get("generate") or derive_values.generate
    source, tree, module = _read_and_load(path)
    notes, warnings = [], []
    slots = size_constants.find_size_slots(tree, vars(module))
    problem_named = size_constants.named_integers(tree, vars(module))
    gates, gate_notes, failures = find_gates(path, tree, slots, device)
    notes += gate_notes
    problem = problem_shapes(path, gates, failures, device, warnings)
    gates = gates or [problem.gate]
    first = gates[0]
    _check_deterministic(path, first)
    tensors, scalars, entry_notes = signature_entries.collect(first.built, len(first.outputs))
    notes += entry_notes
    if options.get("capacity_check", True):
        _check_capacity(problem, device)

    workloads = [g.name for g in gates if g.name != "problem"] + ["problem"]
    shapes_at = {g.name: _shapes(tensors, g.built, g.outputs) for g in gates}
    shapes_at["problem"] = problem.shapes_for(tensors, shapes_at, problem_named)
    named = {g.name: g.built.named for g in gates}
    named["problem"] = problem_named
    labels = [s.label for s in slots]  # the rebound sizes name dimensions before derived ones
    priority = labels + [k for k in problem_named if k not in labels]
    symbolic, dims = name_dimensions(
        [(e.name, {w: shapes_at[w][i] for w in workloads}) for i, e in enumerate(tensors)],
        {w: named[w] for w in workloads}, priority)

    rules, distributions, rule_notes = _input_rules(tensors, gates, generate)
    notes += rule_notes
    provided = {r["tensor"] for r in rules if r["rule"] == "problem"}
    tolerance, tolerance_notes = tolerance_of(tensors, gates, generate, distributions, shapes_at)
    notes += tolerance_notes
    double, double_note = double_reference(first)
    notes += [double_note] if double_note else []
    # The fp32 precision rule needs the float64 reference; it applies where tensor cores could
    # do the module's fp32 work at lower precision.
    precise_ops = tensor_core_ops(first.built.model) if double else []
    if precise_ops:
        notes.append(f"fp32 precision rule: candidates may err at most a few times the module "
                     f"run at fp32 without TF32 ({', '.join(precise_ops)} could run on tensor "
                     f"cores)")

    derived = {
        "format": FORMAT, "version": VERSION,
        "name": os.path.splitext(os.path.basename(path))[0],
        "description": _description(module.Model),
        "problem": path,
        "problem_sha256": hashlib.sha256(source).hexdigest(),
        "family": "", "family_match": None, "family_misses": {},
        "signature": {
            "tensors": [_tensor_json(e, symbolic[e.name], first, e.name in provided)
                        for e in tensors],
            "scalars": [{"name": s["name"], "dtype": s["dtype"], "value": s["value"]}
                        for s in scalars]},
        "workloads": [{"name": w, "dims": dims[w], "timed": w == "problem"} for w in workloads],
        "tolerance": tolerance,
        "distributions": distributions,
        "flops": "", "bytes": "",
        "torch": {
            "tensors": [_source_json(e) for e in tensors],
            "scalars": [{"source": "input", "index": s["index"], "name": s["name"]}
                        for s in scalars],
            "workloads": {w: {"constants": _constants_of(w, gates),
                              "shapes": [list(shape) for shape in shapes_at[w]]}
                          for w in workloads},
            "double_reference": double,
            "fp32_model": bool(precise_ops)},
        "input_rules": rules,
        "notes": notes,
        "warnings": warnings,
    }
    if match_family is not None:
        instances = [(g.name, g.built.model, g.built.inputs) for g in gates]
        result = match_family(derived, instances)
        derived = result if isinstance(result, dict) else derived
    return derived


def _check_deterministic(path, gate):
    """Raises DeriveError when two forwards on the same inputs differ: expected outputs must be
    reproducible for any kernel to be checked against them (dropout in training mode, or a
    torch.rand inside forward, are not). The model's state is restored between the calls."""
    model = gate.built.model
    saved = copy.deepcopy(model.state_dict())
    try:
        first = run_forward(model, [_clone(v) for v in gate.built.inputs])
        model.load_state_dict(saved)
        second = run_forward(model, [_clone(v) for v in gate.built.inputs])
    except Exception:  # forward was run at this gate already; other checks report its errors
        return
    finally:
        model.load_state_dict(saved)
    for a, b in zip(first, second):
        if a.shape != b.shape or not (torch.equal(a, b) or _both_nan_equal(a, b)):
            raise DeriveError(
                f"{path}: forward is not deterministic: two calls on the same inputs at workload "
                f"'{gate.name}' give different outputs (dropout or random numbers in forward?); "
                "kforge can check a kernel only against a reproducible reference")


def _clone(value):
    return value.clone() if isinstance(value, torch.Tensor) else value


def _both_nan_equal(a, b):
    if not a.is_floating_point():
        return False
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


def _shapes(tensors, built, outputs):
    return [tuple(input_rules.value_of(e, built, outputs).shape) for e in tensors]


def _tensor_json(entry, shape, gate, provided=False):
    role = "output" if entry.source == "output" else "input"
    dtype = entry.dtype
    if dtype is None:  # an output: its dtype is what the forward returned
        dtype = gate.outputs[entry.key].dtype
    what = f"{entry.source} '{entry.name}'"
    tensor = {"name": entry.name, "role": role,
              "dtype": signature_entries.dtype_name(dtype, what), "shape": shape}
    if provided:
        tensor["provided"] = True
    return tensor


def _source_json(entry):
    if entry.source in ("input", "output"):
        return {"source": entry.source, "index": entry.key}
    return {"source": entry.source, "name": entry.key}


def _constants_of(workload, gates):
    for gate in gates:
        if gate.name == workload and workload != "problem":
            return dict(gate.constants)
    return {}


def _description(model_class):
    lines = (model_class.__doc__ or "").strip().splitlines()
    return lines[0].strip() if lines else ""


def _input_rules(tensors, gates, generate):
    """(input_rules JSON, distributions, notes). An input or buffer whose values are constrained
    (input_rules.constrained), or that must be non-negative, follows rule "problem": its values
    come from the problem's own get_inputs() / Model() under each seed (a provided input,
    src/worker/provided_inputs.h); the others are generated. DeriveError when no distribution
    keeps the forward finite."""
    positions = {e.name: i for i, e in enumerate(tensors)}
    constrained = input_rules.constrained(tensors, gates)
    generated = [e for e in tensors if e.source != "output" and e.name not in constrained
                 and e.dtype is not None and e.dtype.is_floating_point]
    distributions, notes, non_negative = input_rules.choose_distributions(
        gates, generated, positions, generate)
    if non_negative:
        # Those entries are provided from now on: the distributions are those under which the
        # rest, still generated, keep the forward finite.
        constrained.update(non_negative)
        generated = [e for e in generated if e.name not in non_negative]
        distributions, notes, _ = input_rules.choose_distributions(
            gates, generated, positions, generate)
        if not generated:
            distributions = list(input_rules.BASE_DISTRIBUTIONS)
    rules = []
    for entry in tensors:
        if entry.source == "output":
            continue
        if entry.name in constrained:
            rules.append({"tensor": entry.name, "rule": "problem", "why": constrained[entry.name]})
        else:
            kind = {"input": "a float input of get_inputs()",
                    "parameter": "a float parameter of the model",
                    "buffer": "a float buffer of the model, read-only in forward"}[entry.source]
            rules.append({"tensor": entry.name, "rule": "generated", "why": kind})
    for rule in rules:
        if rule["rule"] == "problem":
            entry = next(e for e in tensors if e.name == rule["tensor"])
            origin = ("the problem's own get_inputs()" if entry.source == "input"
                      else "the problem's own Model()")
            rule["why"] += f": values from {origin} under each seed"
    if not distributions:
        raise DeriveError("the forward gives non-finite outputs under every input distribution "
                          "kforge generates (uniform, normal, heavy_tailed)")
    return rules, distributions, notes


def _device_bytes(device):
    """Memory of the device the problem will run on: the GPU's, or the host's RAM."""
    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _check_capacity(problem, device):
    """DeriveError when the problem's own tensors cannot fit the device together."""
    weights = problem.weight_bytes
    total = problem.total_bytes
    capacity = _device_bytes(device)
    if weights > capacity:
        raise DeriveError(f"the model is too large for the {device} device: its parameters "
                          f"and buffers need {weights / 2**30:.1f} GiB, the device has "
                          f"{capacity / 2**30:.1f} GiB")
    if total > capacity:
        raise DeriveError(f"the problem is too large for the {device} device: its inputs, "
                          f"weights and outputs need {total / 2**30:.1f} GiB, the device has "
                          f"{capacity / 2**30:.1f} GiB")
