"""Which inputs kforge may generate, and under which distributions the forward stays finite.

An input whose meaning constrains its values (integer class ids, a bool mask, a symmetric or
triangular matrix, probabilities) cannot be replaced by generated values without changing the
problem: a kernel that assumes symmetry would pass on symmetric inputs and be wrong on generated
ones, or the reverse. Those are found from the problem's own get_inputs() values; the rest are
generated, which is what catches kernels that only work on the problem's [0, 1) values.
"""
from dataclasses import dataclass

import torch

from kforge_torch.problem_run import all_finite, run_forward

# Seed of the derivation's generated values (any fixed value: the test is about finiteness).
GENERATION_SEED = 1
BASE_DISTRIBUTIONS = ("uniform", "normal", "heavy_tailed")


@dataclass
class Entry:
    """One signature tensor and where it lives in the module (docs/torch_tasks.md, torch.tensors).

    source: "input" | "parameter" | "buffer" | "output"; key: the forward argument or output
    index, or the parameter/buffer's dotted name.
    """
    name: str
    source: str
    key: object
    dtype: object = None  # torch dtype


def value_of(entry, built, outputs=None):
    """The tensor `entry` names in a built problem (outputs from `outputs`)."""
    if entry.source == "input":
        return built.inputs[entry.key]
    if entry.source == "parameter":
        return dict(built.model.named_parameters())[entry.key]
    if entry.source == "buffer":
        return dict(built.model.named_buffers())[entry.key]
    return outputs[entry.key]


def structure_reason(tensor):
    """Why `tensor`'s values look constrained (so kforge must not generate them), or None."""
    if tensor.dtype == torch.bool:
        return "a bool mask"
    if not tensor.is_floating_point():
        low, high = (int(tensor.min()), int(tensor.max())) if tensor.numel() else (0, 0)
        return f"{_dtype_name(tensor.dtype)} values in [{low}, {high}], e.g. indices or class ids"
    if tensor.dim() >= 2 and tensor.shape[-1] == tensor.shape[-2] and tensor.shape[-1] > 1:
        lower = torch.tril(tensor, diagonal=-1)
        upper = torch.triu(tensor, diagonal=1)
        if bool((upper != 0).any()) and bool((lower == 0).all()):
            return "upper triangular matrices"
        if bool((lower != 0).any()) and bool((upper == 0).all()):
            return "lower triangular matrices"
        if bool((upper != 0).any()) and torch.equal(tensor, tensor.transpose(-1, -2)):
            return "symmetric matrices"
    if tensor.dim() >= 1 and tensor.shape[-1] > 1 and tensor.numel() > 0:
        wide = tensor.double()
        if bool((wide >= 0).all()) and torch.allclose(wide.sum(-1), torch.ones(()).double(),
                                                       atol=1e-4):
            return "rows that sum to 1 (probabilities)"
        if torch.allclose(wide.norm(dim=-1), torch.ones(()).double(), atol=1e-4):
            return "rows of unit L2 norm"
    return None


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def constrained(entries, gates):
    """{entry name: why} for the input and buffer entries whose get_inputs()/construction values
    are constrained at every gate (a property of one small draw alone may be chance)."""
    reasons = {}
    for entry in entries:
        if entry.source not in ("input", "buffer"):
            continue
        found = [structure_reason(value_of(entry, gate.built)) for gate in gates]
        if found and all(found):
            reasons[entry.name] = found[0]
    return reasons


def run_generated(built, generated, positions, distribution, generate, absolute=()):
    """The outputs of the forward with each entry of `generated` replaced by generated values
    (`positions[name]` is its tensor index in the signature); entries named in `absolute` get
    |values|. Parameters and buffers are restored afterwards. Raises what forward raises."""
    key = (distribution, tuple(sorted(absolute)), tuple(e.name for e in generated))
    if key not in built.generated_outputs:
        built.generated_outputs[key] = _run_generated(built, generated, positions, distribution,
                                                      generate, absolute)
    return built.generated_outputs[key]


def _run_generated(built, generated, positions, distribution, generate, absolute):
    model = built.model
    saved = {name: t.detach().clone() for name, t in model.state_dict().items()}
    inputs = list(built.inputs)
    try:
        with torch.no_grad():
            for entry in generated:
                target = value_of(entry, built)
                values = generate(tuple(target.shape), target.dtype, GENERATION_SEED,
                                  positions[entry.name], distribution).to(target.device)
                if entry.name in absolute:
                    values = values.abs()
                if entry.source == "input":
                    inputs[entry.key] = values
                else:
                    target.copy_(values)
        return run_forward(model, inputs)
    finally:
        model.load_state_dict(saved)


def _finite_everywhere(gates, generated, positions, distribution, generate, absolute=()):
    try:
        return all(all_finite(run_generated(g.built, generated, positions, distribution, generate,
                                            absolute)) for g in gates)
    except Exception:  # e.g. an index computed from values; counts as not finite
        return False


def has_eps(model):
    """True when the model or a submodule has a float `eps` (a norm's additive epsilon)."""
    return any(isinstance(getattr(m, "eps", None), float) for m in model.modules())


def choose_distributions(gates, generated, positions, generate):
    """(distributions kept, notes, {entry: why} of non-negative-only entries).

    A distribution is dropped when the forward gives non-finite outputs under it at a gate
    (where the problem's own values gave finite ones). When taking |values| of the entries whose
    problem values are all non-negative makes it finite, those entries are non-negative-only
    (a sqrt or log of them): they are reported, not dropped silently.
    """
    wanted = list(BASE_DISTRIBUTIONS)
    notes, non_negative = [], {}
    if any(has_eps(g.built.model) for g in gates):
        wanted.append("small")
        notes.append("the model has an additive eps: 'small' inputs (magnitude 2^-10, where eps "
                     "dominates) make a wrong eps show")
    kept = []
    for distribution in wanted:
        if _finite_everywhere(gates, generated, positions, distribution, generate):
            kept.append(distribution)
            continue
        signed = [e for e in generated if all(bool((value_of(e, g.built) >= 0).all())
                                              for g in gates)]
        fixes = [e for e in signed if _finite_everywhere(
            gates, generated, positions, distribution, generate, absolute={e.name})]
        for entry in fixes:
            non_negative.setdefault(entry.name, "non-negative values: the forward gives "
                                    f"non-finite outputs for negative ones ({distribution})")
        if not fixes:
            notes.append(f"distribution '{distribution}' dropped: the forward gives non-finite "
                         "outputs for it at a gate workload, finite ones for get_inputs() values")
    return kept, notes, non_negative
