"""Tolerance and float64 reference of a derived task."""
import copy

import torch

from kforge_torch.input_rules import run_generated
from kforge_torch.problem_run import all_finite, run_forward, short_exception

# (rtol, atol as a fraction of the reference output's RMS) per output dtype. f32: a few ulp of
# accumulated rounding relative, and an absolute floor far below a typical element so it cannot
# hide a wrong value; f16/bf16: their ~1e-3 / ~8e-3 epsilon times a reduction's growth.
_BY_DTYPE = {torch.float32: (1e-4, 1e-5), torch.float64: (1e-10, 1e-12),
             torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2)}


def _rms(tensor):
    return float(tensor.double().pow(2).mean().sqrt()) if tensor.numel() else 0.0


def reduction_length(tensors, shapes):
    """Input elements per output element under `shapes` (one shape per entry of `tensors`): the
    length of the reduction behind each output for a matrix-vector product (~K), about 1 for
    element-wise and row-normalizing operators."""
    inputs = sum(_count(shape) for e, shape in zip(tensors, shapes) if e.source != "output")
    outputs = sum(_count(shape) for e, shape in zip(tensors, shapes) if e.source == "output")
    return inputs / max(outputs, 1)


def _count(shape):
    count = 1
    for extent in shape:
        count *= int(extent)
    return count


def tolerance_of(tensors, gates, generate, distributions, shapes_at=None):
    """({"rtol", "atol"[, "workload_atol": {"problem": atol}]}, notes) for the outputs of the task.

    rtol by output dtype (the loosest output's); atol = fraction x RMS of the reference output
    for the first kept distribution at the gate workloads (largest over gates and outputs), so
    the absolute floor scales with what the operator computes. Integer outputs: exact (0, 0).
    When `shapes_at` ({workload: shapes}) has a "problem" workload whose reduction_length is L
    times the largest gate's, the problem workload's own atol (workload_atol) is atol x L, the
    gate workloads keeping atol: with inputs of random sign both an
    output's RMS and an honest fp32 sum's rounding error grow like sqrt(L) (Higham, "Accuracy
    and Stability of Numerical Algorithms", 2nd ed., section 4.2, probabilistic bound), so the
    gate-size atol would fail correct kernels at the problem's own size (KernelBench 4's
    K = 1,048,576 against gate rows of 4,097 did: errors of 1e-2 against an atol of 3e-4).
    """
    positions = {e.name: i for i, e in enumerate(tensors)}
    generated = [e for e in tensors if e.source != "output" and e.dtype is not None
                 and e.dtype.is_floating_point]
    outputs = [e for e in tensors if e.source == "output"]
    rtol, fraction = 0.0, 0.0
    for entry in outputs:
        dtype = gates[0].outputs[entry.key].dtype
        if dtype in _BY_DTYPE:
            rtol = max(rtol, _BY_DTYPE[dtype][0])
            fraction = max(fraction, _BY_DTYPE[dtype][1])
    if fraction == 0.0:
        return {"rtol": 0.0, "atol": 0.0}, ["integer outputs: compared exactly"]
    rms = 0.0
    for gate in gates:
        try:
            values = run_generated(gate.built, generated, positions, distributions[0], generate)
        except Exception:  # checked by the distribution test already; keep get_inputs() values
            values = gate.outputs
        rms = max([rms] + [_rms(v) for v in values if v.is_floating_point()])
    notes = []
    if rms == 0.0:
        notes.append("the reference's outputs are all zeros at the gate workloads; atol is "
                     "the bare fraction")
        rms = 1.0
    growth = 1.0
    if shapes_at and "problem" in shapes_at:
        gate_length = max(reduction_length(tensors, shapes_at[g.name]) for g in gates
                          if g.name in shapes_at) if any(g.name in shapes_at for g in gates) else 1.0
        growth = max(1.0, reduction_length(tensors, shapes_at["problem"]) / max(gate_length, 1.0))
    atol = float(f"{fraction * rms:.3g}")
    tolerance = {"rtol": rtol, "atol": atol}
    notes.append(f"atol = {fraction:g} x the reference's output RMS ({rms:.3g}, "
                 f"'{distributions[0]}' inputs at the gate workloads)")
    if growth > 1.0:
        # Only the problem's own workload: the gate workloads keep the tight atol, which is what
        # catches a kernel that drops part of a reduction (a mean over half the rows).
        tolerance["workload_atol"] = {"problem": float(f"{fraction * rms * growth:.3g}")}
        notes.append(f"on workload 'problem', atol x {growth:.3g} = "
                     f"{tolerance['workload_atol']['problem']:g}: the growth of the reduction "
                     f"length from the gate workloads to the problem's own")
    return tolerance, notes


def grow_for_reduction(result, reduction):
    """Raises the timed workloads' atol (tolerance.workload_atol) of a family-matched task `result`
    (changed in place) by the growth of its true reduction length, the product of the dims named
    in `reduction` (a GEMM's ["K"], a convolution's ["cig", "kd", "kh", "kw"]), from the largest
    gate workload's to the timed one's, when that gives more than the element-count estimate
    tolerance_of made before the family was known (which misses a GEMM's: its weight is shared
    by every row, so inputs / outputs is K / N + K / M, not K). Same scaling rule as
    tolerance_of; the gate workloads keep their atol. Adds a note when it raises one."""
    tolerance = result.get("tolerance") or {}
    atol = float(tolerance.get("atol", 0.0))
    if atol <= 0.0:
        return

    def length(workload):
        value = 1
        for name in reduction:
            value *= int(workload["dims"].get(name, 1))
        return value
    gates = [w for w in result["workloads"] if not w.get("timed")]
    if not gates:
        return
    gate_length = max(length(w) for w in gates)
    for workload in result["workloads"]:
        if not workload.get("timed"):
            continue
        growth = length(workload) / max(gate_length, 1)
        grown = float(f"{atol * growth:.3g}")
        current = tolerance.get("workload_atol", {}).get(workload["name"], atol)
        if grown > current:
            tolerance.setdefault("workload_atol", {})[workload["name"]] = grown
            result.setdefault("notes", []).append(
                f"on workload '{workload['name']}', atol x {growth:.3g} = {grown:g}: the growth "
                f"of the family's reduction length ({' * '.join(reduction)}) from the gate "
                f"workloads to this one")
    result["tolerance"] = tolerance


def double_reference(gate):
    """(True, None) when the model runs in float64 at `gate` with finite outputs (its float
    inputs upcast), else (False, a note why). The gate's own model is left as it was."""
    try:
        model = copy.deepcopy(gate.built.model).double()
        inputs = [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                  for v in gate.built.inputs]
        outputs = run_forward(model, inputs)
    except Exception as error:
        return False, f"no float64 reference: forward in float64 raised {short_exception(error)}"
    if not all_finite(outputs):
        return False, "no float64 reference: forward in float64 gives non-finite outputs"
    return True, None


# Module types and functions whose fp32 work a GPU library may do on TF32 or bf16 tensor cores,
# and a candidate kernel too: where the fp32 precision rule (src/evaluation/precision.h) has
# something to tell apart. Element-wise and normalizing ops have no such path.
_TENSOR_CORE_MODULES = (torch.nn.Linear, torch.nn.Bilinear, torch.nn.Conv1d, torch.nn.Conv2d,
                        torch.nn.Conv3d, torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d,
                        torch.nn.ConvTranspose3d, torch.nn.MultiheadAttention, torch.nn.RNNBase)
_TENSOR_CORE_NAMES = {"matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "einsum", "linear",
                      "bilinear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                      "conv_transpose2d", "conv_transpose3d", "scaled_dot_product_attention",
                      "tensordot", "matrix_power", "chain_matmul", "inner", "outer", "mv",
                      "dot", "vdot", "__matmul__"}


def tensor_core_ops(model):
    """Names of the ops in `model` a GPU may compute on tensor cores (a Linear, a convolution, a
    matmul in forward), found from its submodules' types and the names forward's code uses;
    empty when there are none."""
    found = set()
    for module in model.modules():
        if isinstance(module, _TENSOR_CORE_MODULES):
            found.add(type(module).__name__)
        code = getattr(type(module).forward, "__code__", None)
        names = set(code.co_names) if code is not None else set()
        found.update(n for n in names & _TENSOR_CORE_NAMES)
        if code is not None and _uses_matmul_operator(code):
            found.add("@")
    return sorted(found)


def _uses_matmul_operator(code):
    """True when `code` (or a function nested in it) applies the @ operator."""
    import dis
    for instruction in dis.get_instructions(code):
        if instruction.opname == "BINARY_MATRIX_MULTIPLY" or (
                instruction.opname == "BINARY_OP" and instruction.argrepr in ("@", "@=")):
            return True
    return any(_uses_matmul_operator(c) for c in code.co_consts if hasattr(c, "co_code"))
