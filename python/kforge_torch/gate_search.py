"""Finding gate workloads: small bindings of the size constants at which the forward still runs."""
import time
from dataclasses import dataclass

from kforge_torch import size_constants
from kforge_torch.problem_run import (DeriveError, all_finite, build, run_forward,
                                      short_exception)

# Largest tensor (elements) of a gate workload: 2^22 floats are 16 MiB, quick to make, run and
# compare on a 2-core host, and still past every block and L2-slice boundary kernels tile by.
MAX_GATE_ELEMENTS = 1 << 22
# Bindings run for real at most, per kind of gate: each costs a module load and a small forward
# (milliseconds), but a file whose sizes resist rebinding should fail over to scaled sizes quickly.
MAX_REAL_ATTEMPTS = {"small": 3, "tail": 6, "scaled": 4, "relax": 10}
# A gate forward slower than this is kept only when no faster binding of its kind runs: the
# derivation runs each gate about five times (distributions, tolerance) within a few seconds, on
# a 2-core host too (a 1031^3 matmul takes 0.4 s there; a 257^3 one, 6 ms).
GATE_FORWARD_BUDGET_S = 0.1


@dataclass
class Gate:
    """A gate workload that ran: its name, slot values, constants and the run's tensors."""
    name: str
    values: dict     # {slot label: int}
    constants: dict  # load_problem constants
    built: object    # problem_run.Built (real tensors)
    outputs: list


class _Search:
    def __init__(self, path, tree, slots, device):
        self.path, self.tree, self.slots, self.device = path, tree, slots, device
        self.failures = []  # (values, reason) of bindings that did not run
        self.real_attempts = {kind: 0 for kind in MAX_REAL_ATTEMPTS}

    def named_of(self, module):
        return size_constants.named_integers(self.tree, vars(module))

    def largest_tensor(self, constants):
        """Elements of the largest tensor a binding makes, from a meta build (no memory); None
        when the meta build fails (the real run then says why, at small sizes)."""
        try:
            built = build(self.path, constants, meta=True)
            tensors = [v for v in built.inputs if hasattr(v, "numel")]
            tensors += list(built.model.parameters()) + list(built.model.buffers())
            try:
                tensors += run_forward(built.model, built.inputs)
            except Exception:  # an operator without a meta kernel: inputs and weights decide
                pass
            return max((t.numel() for t in tensors), default=0)
        except DeriveError:
            raise
        except Exception:
            return None

    def attempt(self, kind, name, values):
        """Runs the forward at `values`; (the Gate, or None with the reason in failures, and the
        forward's time in seconds)."""
        constants = size_constants.constants_of(self.slots, values)
        largest = self.largest_tensor(constants)
        if largest is not None and largest > MAX_GATE_ELEMENTS:
            self.failures.append((values, f"a tensor of {largest} elements"))
            return None, 0.0
        if self.real_attempts[kind] >= MAX_REAL_ATTEMPTS[kind]:
            return None, 0.0
        self.real_attempts[kind] += 1
        try:
            built = build(self.path, constants, meta=False, device=self.device,
                          named_of=self.named_of)
            start = time.perf_counter()
            outputs = run_forward(built.model, built.inputs)
            elapsed_s = time.perf_counter() - start
        except DeriveError:
            raise
        except Exception as error:
            self.failures.append((values, short_exception(error)))
            return None, 0.0
        if not all_finite(outputs):
            self.failures.append((values, "non-finite outputs for get_inputs() values"))
            return None, 0.0
        return Gate(name, values, constants, built, outputs), elapsed_s

    def first(self, bindings, kind, name=None):
        """The first of `bindings` (name, values) that runs within the time budget, else the
        first that runs at all, else None."""
        slow = None
        for gate_name, values in bindings:
            gate, elapsed_s = self.attempt(kind, name or gate_name, values)
            if gate and elapsed_s <= GATE_FORWARD_BUDGET_S:
                return gate
            slow = slow or gate
        return slow

    def first_of_kind(self, kind, name):
        return self.first([(name, values) for candidate_kind, values in
                           size_constants.candidate_bindings(self.slots)
                           if candidate_kind == kind], kind)

    def smallest_fitting_shift(self):
        """The least shift at which every tensor of the scaled binding fits MAX_GATE_ELEMENTS."""
        for shift in range(1, max(s.value for s in self.slots).bit_length() + 1):
            constants = size_constants.constants_of(
                self.slots, size_constants.scaled_binding(self.slots, shift))
            largest = self.largest_tensor(constants)
            if largest is not None and largest <= MAX_GATE_ELEMENTS:
                return shift
        return None

    def scaled(self, shifts):
        """A gate at the first of `shifts` that runs (sizes divided by 2**shift)."""
        bindings = [(f"gate_div{1 << shift}", size_constants.scaled_binding(self.slots, shift))
                    for shift in shifts]
        return self.first(bindings, "scaled")

    def relax(self, gate):
        """From a scaled gate, each slot in turn set to its small odd value, or doubled when it
        ties another slot, kept when the forward still runs: sizes that need not divide anything
        become odd, and tied sizes (in/out channels) stop naming each other's dimensions.
        Returns the relaxed Gate, or None when no change runs."""
        small = dict(size_constants.candidate_bindings(self.slots)[0][1])
        values, relaxed = dict(gate.values), None
        for slot in self.slots:
            label = slot.label
            options = [small[label]]
            if any(values[other] == values[label] for other in values if other != label):
                options.append(values[label] * 2)
            for option in options:
                trial = dict(values, **{label: option})
                found, elapsed_s = self.attempt("relax", "gate_small", trial)
                if found and elapsed_s <= GATE_FORWARD_BUDGET_S:
                    values, relaxed = trial, found
                    break
        return relaxed


def find_gates(path, tree, slots, device):
    """Gate workloads of a problem: (gates, notes, failures).

    First a binding of small odd sizes ("gate_small") and one with a size past a block size
    ("gate_tail"); when those do not run (constants that must divide one another, e.g. channels
    and groups), the sizes divided by a common power of two ("gate_div64"). `failures` lists
    (slot values, reason) of the bindings that did not run, for messages. No slots: no gates.
    """
    if not slots:
        return [], [], []
    search = _Search(path, tree, slots, device)
    notes = []
    gates = [g for g in (search.first_of_kind("small", "gate_small"),
                         search.first_of_kind("tail", "gate_tail")) if g]
    if len(gates) < 2:
        shift = search.smallest_fitting_shift()
        if shift is not None:
            wanted = 2 - len(gates)
            # The larger divisor first when two are wanted: the pair then differs in every size.
            shifts = [shift + 2, shift + 1, shift] if wanted == 2 else [shift, shift + 1]
            first = search.scaled(shifts)
            if first:
                gates.append(first)
                notes.append("small odd sizes did not run; a gate keeps the problem's size "
                             f"ratios, divided by {first.name[len('gate_div'):]}")
                relaxed = search.relax(first) if wanted == 2 else None
                if relaxed:
                    gates.insert(0, relaxed)
                elif wanted == 2:
                    used = int(first.name[len("gate_div"):]).bit_length() - 1
                    second = search.scaled(list(range(used - 1, shift - 1, -1)))
                    if second:
                        gates.append(second)
    return gates, notes, search.failures
