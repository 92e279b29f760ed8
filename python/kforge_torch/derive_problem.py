"""The problem's own workload: its shapes, found without making its tensors when they are large."""
from kforge_torch.gate_search import Gate
from kforge_torch.input_rules import value_of
from kforge_torch.meta_tensors import tensor_bytes
from kforge_torch.problem_run import (DeriveError, all_finite, build, run_forward,
                                      raised_text, short_exception)
from kforge_torch.symbols import evaluate_shape, name_dimensions

# Below this many bytes of inputs a problem may be run for real at its own sizes when its
# shapes cannot be had otherwise: quick to make on any host (KernelBench's are mostly GiBs).
REAL_RUN_LIMIT_BYTES = 256 << 20


class ProblemShapes:
    """The problem workload's tensors, from a meta build (no memory) where it works."""

    def __init__(self, path, device):
        self.path, self.device = path, device
        self.meta, self.meta_outputs, self.meta_error, self.real = None, None, None, None
        self.gate = None       # a Gate at the problem's sizes when no smaller binding runs
        self.gate_named = {}   # {gate workload: {label: int}}, for predicting shapes
        try:
            self.meta = build(path, {}, meta=True)
        except DeriveError:
            raise
        except Exception as error:
            self.meta_error = short_exception(error)
            return
        try:
            self.meta_outputs = run_forward(self.meta.model, self.meta.inputs)
        except DeriveError:
            raise
        except Exception as error:  # an operator without a meta kernel (or data-dependent)
            self.meta_error = short_exception(error)

    @property
    def input_bytes(self):
        """Bytes of the problem's tensor inputs (None when unknown)."""
        if self.meta is None:
            return None
        return sum(tensor_bytes(v) for v in self.meta.inputs if hasattr(v, "element_size"))

    @property
    def weight_bytes(self):
        """Bytes of the model's parameters and buffers at the problem's sizes (0 if unknown)."""
        if self.meta is None:
            return 0
        model = self.meta.model
        return sum(tensor_bytes(t) for t in list(model.parameters()) + list(model.buffers()))

    @property
    def total_bytes(self):
        """Bytes of inputs, weights and (when known) outputs at the problem's sizes."""
        outputs = sum(tensor_bytes(t) for t in self.meta_outputs or [])
        return (self.input_bytes or 0) + self.weight_bytes + outputs

    def small_enough(self):
        return self.input_bytes is not None and self.input_bytes < REAL_RUN_LIMIT_BYTES

    def run_real(self):
        """A Gate at the problem's own sizes, run for real (only when small_enough)."""
        if self.real is None:
            built = build(self.path, {}, meta=False, device=self.device)
            self.real = Gate("problem", {}, {}, built, run_forward(built.model, built.inputs))
        return self.real

    def shapes_for(self, tensors, shapes_at, named):
        """Shapes of signature `tensors` at the problem's sizes: from the meta build, else from
        the symbols found at the gate workloads (`shapes_at` {gate: [shape]}, `named` the
        problem's constants), else a real run when small; DeriveError otherwise."""
        if self.real is not None:
            return [tuple(value_of(e, self.real.built, self.real.outputs).shape) for e in tensors]
        if self.meta is not None and self.meta_outputs is not None:
            return [tuple(value_of(e, self.meta, self.meta_outputs).shape) for e in tensors]
        predicted = self._predict(tensors, shapes_at, named)
        if predicted is not None:
            return predicted
        if self.small_enough():
            gate = self.run_real()
            return [tuple(value_of(e, gate.built, gate.outputs).shape) for e in tensors]
        size = ("" if self.input_bytes is None
                else f" (its inputs need {self.input_bytes / 2**30:.1f} GiB)")
        raise DeriveError(
            "cannot derive the shapes at the problem's own sizes without making its tensors"
            f"{size}: on meta tensors it raised {self.meta_error}, and the gate workloads do "
            "not name every dimension after a size constant")

    def _predict(self, tensors, shapes_at, named):
        """Shapes from the gates' symbols (two gates at least: with one, nothing varies)."""
        gates = list(shapes_at)
        if len(gates) < 2:
            return None
        gate_named = {g: self.gate_named[g] for g in gates}
        symbolic, _ = name_dimensions(
            [(e.name, {g: shapes_at[g][i] for g in gates}) for i, e in enumerate(tensors)],
            gate_named, list(named))
        shapes = [evaluate_shape(symbolic[e.name], named) for e in tensors]
        if any(s is None for s in shapes):
            return None
        if self.meta is not None:
            # The inputs' and weights' shapes are known from meta tensors: a prediction that
            # gets them wrong (a size the gates did not vary) is not trusted for the outputs.
            known = [tuple(value_of(e, self.meta).shape) if e.source != "output" else None
                     for e in tensors]
            if any(k is not None and k != s for k, s in zip(known, shapes)):
                return None
        return shapes


def problem_shapes(path, gates, failures, device, warnings):
    """The ProblemShapes of the problem at `path`; with no gate workload (`gates` empty), its
    `gate` is a real run at the problem's own sizes (a warning says so) when they are small.

    Raises DeriveError when there is no gate and the problem is too large to run, or when
    forward raises at the problem's own sizes too.
    """
    problem = ProblemShapes(path, device)
    problem.gate_named = {g.name: g.built.named for g in gates}
    if gates:
        return problem
    tried = _failure_summary(failures)
    if not problem.small_enough() and not (problem.meta is None and not failures):
        size = ("of unknown size" if problem.input_bytes is None
                else f"need {problem.input_bytes / 2**20:.0f} MiB")
        raised = [(values, reason) for values, reason in failures
                  if not reason.startswith(("a tensor of", "non-finite"))]
        if raised and len({reason for _, reason in raised}) == 1:
            # The same exception at every binding that ran: the forward fails, not the sizes.
            binding = ", ".join(f"{k}={v}" for k, v in raised[0][0].items())
            raise DeriveError(f"{raised_text(raised[0][1])} at every small binding of the "
                              f"size constants tried (e.g. {binding})")
        raise DeriveError(f"no small binding of the size constants runs{tried}, and the "
                          f"problem's own inputs {size}: too large to gate on")
    try:
        problem.gate = problem.run_real()
    except DeriveError:
        raise
    except Exception as error:
        raise DeriveError(raised_text(short_exception(error))) from None
    if not all_finite(problem.gate.outputs):
        raise DeriveError("forward gives non-finite outputs for the problem's own get_inputs()")
    if failures:
        warnings.append(f"no small binding of the size constants runs{tried}; the gate runs "
                        "at the problem's own sizes")
    return problem


def _failure_summary(failures):
    if not failures:
        return ""
    values, reason = failures[0]
    binding = ", ".join(f"{k}={v}" for k, v in values.items())
    return f" (first tried {binding}: {reason})"

