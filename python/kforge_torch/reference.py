"""A derived task (docs/torch_tasks.md, JSON v1) loaded for the reference worker: its problem
module per workload, the model, and the generated inputs placed where the module takes them."""

import collections
import hashlib
import json
import math
import os
import traceback
import types

import torch

from kforge_torch import inputs as kinputs
from kforge_torch.problem_module import load_problem
from kforge_torch.protocol import ProtocolError, bind_shape

TASK_FORMAT = "kforge-torch-task"
TASK_VERSION = 1
SOURCES = ("input", "output", "parameter", "buffer")


def _host_memory_bytes():
    """Physical memory of this machine in bytes, or 0 where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


# Provided values kept across (workload, seed) keys: an eighth of the host's memory, at most
# 16 GiB (the latest key's values are kept whatever their size).
_PROVIDED_KEEP_BYTES = min(16 << 30, _host_memory_bytes() // 8 or (1 << 30))



def _scalar_args(signature_scalars, torch_scalars):
    """{forward argument index: value or None} of forward's scalar arguments: torch.scalars[k]
    = {"source": "input", "index": i, ...} says argument i is a scalar, whose value is the
    entry's own "value" (a family-rewritten task: the value the derivation saw), else that of
    the signature scalar the entry names ("name": the value a native candidate is given too),
    else None (an older derived task: the worker takes it from the module's get_inputs()). An
    i64 value is a Python int. Raises ValueError on a malformed entry."""
    by_name = {s["name"]: s for s in signature_scalars}
    args = {}
    for where in torch_scalars:
        if where.get("source") != "input":
            continue
        index = int(where["index"])
        if "value" in where:
            spec = where
        else:
            spec = by_name.get(where.get("name"))
        if spec is None:
            args[index] = None
            continue
        value = spec["value"]
        args[index] = int(value) if spec.get("dtype") == "i64" else float(value)
    return args

class LoadFailure(Exception):
    """The task file or its problem cannot be used: a load with verdict wrong_signature."""


def describe_exception(error):
    """"Type: text" of an exception, plus the innermost frame in the problem file when known,
    for a verdict message."""
    text = "%s: %s" % (type(error).__name__, error)
    frames = traceback.extract_tb(error.__traceback__)
    if frames:
        last = frames[-1]
        text += " (at %s:%d)" % (os.path.basename(last.filename), last.lineno)
    return text


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ReferenceTask:
    """A derived task file, checked and with its problem module importable.

    path: the task JSON written by the derivation. Raises LoadFailure (with a message for the
    verdict) when the file is unreadable, not a kforge-torch-task v1, its problem file changed
    since derivation (sha256), or the problem module fails to import.
    """

    def __init__(self, path):
        try:
            with open(path, "rb") as f:
                task = json.loads(f.read().decode("utf-8"))
        except (OSError, ValueError) as e:
            raise LoadFailure("cannot read task file %s: %s" % (path, e))
        if not isinstance(task, dict) or task.get("format") != TASK_FORMAT or \
                task.get("version") != TASK_VERSION:
            raise LoadFailure("%s is not a %s version %d file" % (path, TASK_FORMAT, TASK_VERSION))
        try:
            self.problem = task["problem"]
            expected_sha = task["problem_sha256"]
            torch_part = task["torch"]
            self.tensor_sources = torch_part["tensors"]
            self.workloads = torch_part["workloads"]
            self.double_reference = bool(torch_part.get("double_reference", False))
            # The task's fp32 model (src/evaluation/precision.h): forward in the module's own
            # dtype with TF32 off, so its error against the float64 reference is what plain
            # fp32 arithmetic makes. Set only in the copy kforge writes for it.
            self.fp32_model = bool(torch_part.get("fp32_model_run", False))
            self.scalar_args = _scalar_args(task["signature"].get("scalars", []),
                                            torch_part.get("scalars", []))
        except (KeyError, TypeError, ValueError) as e:
            raise LoadFailure("%s lacks field %s" % (path, e))
        for i, where in enumerate(self.tensor_sources):
            if where.get("source") not in SOURCES:
                raise LoadFailure("%s: torch.tensors[%d] has source %r (expected one of %s)"
                                  % (path, i, where.get("source"), ", ".join(SOURCES)))
        try:
            actual_sha = _sha256(self.problem)
        except OSError as e:
            raise LoadFailure("cannot read problem file %s: %s" % (self.problem, e))
        if actual_sha != expected_sha:
            raise LoadFailure("problem file %s changed since derivation (sha256 %s, the task was "
                              "derived from %s): derive the task again"
                              % (self.problem, actual_sha, expected_sha))
        self._modules = {}
        self._model_key = None
        self._model = None
        # (workload, seed) -> provided values, oldest first, at most _PROVIDED_KEEP_BYTES in
        # all (the latest is kept whatever its size).
        self._provided = collections.OrderedDict()
        try:
            load_problem(self.problem, {})
        except Exception as e:
            raise LoadFailure("problem module %s failed to load: %s"
                              % (self.problem, describe_exception(e)))

    # ------------------------------------------------------------ per workload

    def module(self, workload_name):
        """The problem module with the constants of workload `workload_name` (cached)."""
        if workload_name not in self._modules:
            constants = self._workload(workload_name).get("constants", {}) or {}
            self._modules[workload_name] = load_problem(self.problem, constants)
        return self._modules[workload_name]

    def _workload(self, name):
        if name not in self.workloads:
            raise ProtocolError("workload '%s' is not one of the task's (%s)"
                                % (name, ", ".join(sorted(self.workloads))))
        return self.workloads[name]

    def model(self, workload_name, seed, double, device):
        """`Model(*get_init_inputs())` built under torch.manual_seed(seed) on `device`, in
        float64 when `double`. The last one is kept: the same (workload, seed, double) reuses it.
        Exceptions of the module propagate."""
        key = (workload_name, seed, double, str(device))
        if self._model_key != key:
            self._model, self._model_key = None, None  # free the old one before building
            self._model = self.build_model(workload_name, seed, double, device)
            self._model_key = key
        return self._model

    def build_model(self, workload_name, seed, double, device):
        """A new `Model(*get_init_inputs())` as model() builds it, not kept here (the compile
        baseline keeps its own). Exceptions of the module propagate."""
        module = self.module(workload_name)
        torch.manual_seed(seed)
        model = module.Model(*module.get_init_inputs())
        model = model.to(device)
        if double:
            model = model.double()
        return model

    def plan(self, signature, workload):
        """Where each signature tensor lives, as a list of namespaces (spec, source, index,
        name, shape = bound signature shape, module_shape, numel). Raises ProtocolError when the
        signature and the task disagree (tensor count, element counts)."""
        if len(signature.tensors) != len(self.tensor_sources):
            raise ProtocolError("the signature has %d tensors, the task's torch.tensors %d"
                                % (len(signature.tensors), len(self.tensor_sources)))
        shapes = self._workload(workload.name).get("shapes", [])
        if len(shapes) != len(signature.tensors):
            raise ProtocolError("workload '%s' has %d module shapes for %d signature tensors"
                                % (workload.name, len(shapes), len(signature.tensors)))
        plan = []
        for i, spec in enumerate(signature.tensors):
            where = self.tensor_sources[i]
            shape = bind_shape(spec, workload)
            module_shape = [int(d) for d in shapes[i]]
            numel = math.prod(shape)
            if math.prod(module_shape) != numel:
                raise ProtocolError(
                    "tensor '%s': the signature shape %s has %d elements at workload '%s' but the "
                    "module's shape %s has %d" % (spec.name, shape, numel, workload.name,
                                                  module_shape, math.prod(module_shape)))
            plan.append(types.SimpleNamespace(
                spec=spec, source=where["source"], index=int(where.get("index", 0)),
                name=where.get("name", spec.name), shape=shape, module_shape=module_shape,
                numel=numel))
        return plan

    # ------------------------------------------------------------ inputs and calls

    def provided_values(self, plan, workload_name, seed):
        """{signature index: contiguous 1-D CPU tensor} of the provided entries of `plan`
        (TensorSpec.provided) at (workload, seed): for an input, element `index` of get_inputs()
        called right after torch.manual_seed(seed); for a parameter or buffer, that of
        Model(*get_init_inputs()) built right after torch.manual_seed(seed). Values are kept
        per (workload, seed) up to _PROVIDED_KEEP_BYTES (_keep_provided). Exceptions of the module propagate; ProtocolError when a value
        is not a tensor of the signature's dtype and element count."""
        key = (workload_name, seed)
        if key in self._provided:
            self._provided.move_to_end(key)
            return self._provided[key]
        wanted = [(i, e) for i, e in enumerate(plan) if e.spec.provided]
        module = self.module(workload_name)
        given, held = [], {}
        if any(e.source == "input" for _, e in wanted):
            torch.manual_seed(seed)
            given = list(module.get_inputs())
        if any(e.source in ("parameter", "buffer") for _, e in wanted):
            torch.manual_seed(seed)
            model = module.Model(*module.get_init_inputs())
            held = {("parameter", n): t for n, t in model.named_parameters()}
            held.update({("buffer", n): t for n, t in model.named_buffers()})
        made = {}
        for i, entry in wanted:
            if entry.source == "input":
                value = given[entry.index] if entry.index < len(given) else None
                where = "element %d of get_inputs()" % entry.index
            elif entry.source in ("parameter", "buffer"):
                value = held.get((entry.source, entry.name))
                where = "%s '%s' of Model()" % (entry.source, entry.name)
            else:
                raise ProtocolError("tensor '%s' is provided but is an output" % entry.spec.name)
            expected = kinputs.TORCH_DTYPES[entry.spec.dtype]
            if not isinstance(value, torch.Tensor) or value.dtype != expected or \
                    value.numel() != entry.numel:
                got = ("%s of %d elements" % (value.dtype, value.numel())
                       if isinstance(value, torch.Tensor) else type(value).__name__)
                raise ProtocolError(
                    "provided input '%s': %s at workload '%s', seed %d is %s, the signature "
                    "expects %s of %d elements" % (entry.spec.name, where, workload_name, seed, got,
                                                   expected, entry.numel))
            made[i] = value.detach().to("cpu").contiguous().reshape(-1)
        self._keep_provided(key, made)
        return made

    def _keep_provided(self, key, made):
        """Keeps `made` under `key`, dropping the oldest kept values while the kept bytes pass
        _PROVIDED_KEEP_BYTES. Making them again means calling the problem's get_inputs() again,
        which at KernelBench sizes makes every input on the host (93_masked_cumsum: 4 GiB of
        torch.rand and 8 GiB of torch.randint per call, seconds each), and the evaluation asks
        for each seed at least twice (provide, then the expected outputs)."""
        self._provided[key] = made
        self._provided.move_to_end(key)

        def kept_bytes():
            return sum(t.numel() * t.element_size()
                       for values in self._provided.values() for t in values.values())

        while len(self._provided) > 1 and kept_bytes() > _PROVIDED_KEEP_BYTES:
            self._provided.popitem(last=False)

    def generate_inputs(self, plan, seed, distribution, device, host=False, remap="none",
                        workload_name=None):
        """{signature index: tensor} for every input/parameter/buffer, in the signature's dtype,
        viewed as the module's shape, on `device` (generated on the host and uploaded when
        `host`), with the self-test probe `remap` applied (rows: the signature's first
        dimension). Provided entries (TensorSpec.provided) hold provided_values at
        (`workload_name`, seed), a copy of them, never remapped."""
        made = {}
        provided = {}
        if any(e.spec.provided for e in plan):
            if workload_name is None:
                raise ProtocolError("provided inputs need the workload's name")
            provided = self.provided_values(plan, workload_name, seed)
        for i, entry in enumerate(plan):
            if entry.source == "output":
                continue
            if i in provided:
                made[i] = provided[i].to(device, copy=True).view(entry.module_shape)
                continue
            where = "cpu" if host else device
            rows = entry.shape[0] if entry.shape else 1
            tensor = kinputs.generate(entry.spec.dtype, [entry.numel], seed, i, distribution,
                                      where, remap=remap, rows=rows)
            made[i] = tensor.to(device).view(entry.module_shape)
        return made

    def forward_args(self, plan, values, workload_name, seed):
        """The positional arguments of forward: argument k is the tensor of source input index
        k, or the value of the signature scalar that torch.scalars places at k (the value a
        native candidate is given too). Positions neither fills come from the module's
        get_inputs() under torch.manual_seed(seed)."""
        by_index = {e.index: values[i] for i, e in enumerate(plan) if e.source == "input"}
        by_index.update({k: v for k, v in self.scalar_args.items() if v is not None})
        count = max(list(by_index) + list(self.scalar_args)) + 1 if by_index or \
            self.scalar_args else 0
        if len(by_index) == count:
            return [by_index[k] for k in range(count)]
        torch.manual_seed(seed)
        given = list(self.module(workload_name).get_inputs())
        return [by_index.get(k, given[k] if k < len(given) else None)
                for k in range(max(count, len(given)))]

    @staticmethod
    def module_tensors(model, plan):
        """{signature index: the model's parameter or buffer} for parameter/buffer sources.
        Raises ProtocolError naming a missing one."""
        found = {}
        parameters = dict(model.named_parameters())
        buffers = dict(model.named_buffers())
        for i, entry in enumerate(plan):
            if entry.source not in ("parameter", "buffer"):
                continue
            table = parameters if entry.source == "parameter" else buffers
            if entry.name not in table:
                raise ProtocolError("the module has no %s '%s' (it has %s)" % (
                    entry.source, entry.name, ", ".join(sorted(table)) or "none"))
            found[i] = table[entry.name]
        return found

    @staticmethod
    def outputs(plan, returned):
        """[(signature index, tensor)] of what forward returned, checked against the signature.
        Returns (pairs, "") or (None, message) when forward returned something else."""
        if isinstance(returned, torch.Tensor):
            items = [returned]
        elif isinstance(returned, (tuple, list)):
            items = list(returned)
        else:
            return None, "forward returned %s (expected a tensor or a tuple/list of tensors)" \
                % type(returned).__name__
        pairs = []
        for i, entry in enumerate(plan):
            if entry.source != "output":
                continue
            if entry.index >= len(items):
                return None, "forward returned %d value(s); output '%s' is element %d" % (
                    len(items), entry.spec.name, entry.index)
            item = items[entry.index]
            if not isinstance(item, torch.Tensor):
                return None, "forward returned %s as element %d (output '%s'), not a tensor" % (
                    type(item).__name__, entry.index, entry.spec.name)
            if item.numel() != entry.numel:
                return None, ("forward returned a tensor of shape %s (%d elements) as element %d "
                              "(output '%s'); the signature expects %s (%d elements)"
                              % (list(item.shape), item.numel(), entry.index, entry.spec.name,
                                 entry.shape, entry.numel))
            pairs.append((i, item))
        return pairs, ""
