"""A Python candidate for a PyTorch-problem task: a KernelBench-format source defining
`class ModelNew(nn.Module)` (torch ops, load_inline or Triton inside), loaded by the candidate
worker (candidate_worker.py) against the derived task (docs/torch_tasks.md).

Decisions, and why:
- Constructor: `ModelNew(*get_init_inputs())` with the problem's own constructor arguments at
  each workload, under torch.manual_seed(seed) of its first request, as the reference builds
  `Model`; one module per workload then serves every seed, so state kept between calls shows.
  Its signature must be `Model.__init__`'s (same parameter names, in order): a drop-in module.
  On a GPU with PyTorch 2.x the constructor runs with the device as the default device
  (construction_device): its parameters are overwritten before every call anyway, and
  initialising a large one on the host cost more than the rest of the gate's input work.
- Parameters: every parameter or buffer the signature lists (source "parameter"/"buffer") is
  matched in ModelNew by its `named_parameters()`/`named_buffers()` name, else by position when
  ModelNew has exactly as many of that kind, each of the same element count. Before every call
  it receives kforge's generated values, the same the reference receives (reference.py), so
  both compute on equal weights: stronger than KernelBench's "seed both alike", which relies on
  ModelNew creating its parameters in Model's order, and the values come from kforge's
  distributions, not only nn.init's.
- The problem module's `Model` is never reachable here: the worker reads get_init_inputs() and
  get_inputs() of the problem file, but the modules it keeps have `Model` removed (the static
  screen refuses sources that name the problem or `Model` at all). Expected outputs are never
  computed in this process.
- Builds: a candidate's own code (its import, and ModelNew's constructor) runs with
  TORCH_EXTENSIONS_DIR set to a folder of its content hash under KFORGE_TORCH_EXTENSIONS_ROOT
  (kforge's artifact cache, src/cli/worker_setup.cpp), so a load_inline build is cached by
  content like a native build: the same source loads again without compiling (torch rewrites
  its sources only when they change, and ninja then has nothing to do), and two candidates that
  name their extension alike never rebuild over each other's build folder.
"""

import contextlib
import hashlib
import inspect
import os
import sys
import types

import torch

from kforge_torch.protocol import ProtocolError
from kforge_torch.provided import provided_file
from kforge_torch.reference import LoadFailure, ReferenceTask, describe_exception
from kforge_torch import inputs as kinputs


class CandidateFailure(Exception):
    """A candidate that cannot be used: carries the verdict (compile_error, wrong_signature,
    runtime_error, rejected_by_policy) and the message for the load reply."""

    def __init__(self, verdict, message):
        super().__init__(message)
        self.verdict = verdict


class CandidateTask(ReferenceTask):
    """The derived task as the candidate worker uses it: the plan, generated inputs, the
    problem's constructor and non-tensor forward arguments, and provided inputs read from the
    files the reference worker wrote (provided_dir), never computed here. Raises ProtocolError
    (a harness error, not the candidate's) when the task file cannot be used."""

    def __init__(self, path):
        try:
            super().__init__(path)
        except LoadFailure as e:
            raise ProtocolError("candidate worker: task %s: %s" % (path, e))
        self.provided_dir = ""

    def module(self, workload_name):
        """The problem module at `workload_name` without its `Model` (cached)."""
        module = super().module(workload_name)
        module.__dict__.pop("Model", None)
        return module

    def model_signature(self):
        """inspect.Signature of the problem's Model.__init__ (without self), read from a
        module that is dropped right after."""
        from kforge_torch.problem_module import load_problem
        problem = load_problem(self.problem, {})
        try:
            return inspect.signature(problem.Model.__init__)
        finally:
            problem.__dict__.clear()

    def init_args(self, workload_name):
        """get_init_inputs() of the problem at `workload_name`, as a list."""
        return list(self.module(workload_name).get_init_inputs())

    def provided_values(self, plan, workload_name, seed):
        """{signature index: 1-D CPU tensor} of the provided entries at (workload, seed), read
        from "<provided_dir>/<workload>.<seed>.<index>.bin". ProtocolError when the request
        named no folder or a file is missing or of the wrong size."""
        made = {}
        for i, entry in enumerate(plan):
            if not entry.spec.provided:
                continue
            if not self.provided_dir:
                raise ProtocolError("tensor '%s' is provided but the request names no "
                                    "provided_dir" % entry.spec.name)
            path = provided_file(self.provided_dir, workload_name, seed, i)
            dtype = kinputs.TORCH_DTYPES[entry.spec.dtype]
            expected = entry.numel * kinputs.ELEMENT_BYTES[entry.spec.dtype]
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as e:
                raise ProtocolError("provided input '%s': %s" % (entry.spec.name, e))
            if len(data) != expected:
                raise ProtocolError("provided input '%s': %s holds %d bytes, expected %d"
                                    % (entry.spec.name, path, len(data), expected))
            made[i] = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype)
        return made


def _signature_text(signature):
    return "(" + ", ".join(str(p) for p in list(signature.parameters.values())[1:]) + ")"


@contextlib.contextmanager
def extensions_dir(name):
    """TORCH_EXTENSIONS_DIR set to <KFORGE_TORCH_EXTENSIONS_ROOT>/<name> inside the block, and
    restored after it; nothing changes where that root is not set (a user's own worker)."""
    root = os.environ.get("KFORGE_TORCH_EXTENSIONS_ROOT", "")
    if not root:
        yield
        return
    before = os.environ.get("TORCH_EXTENSIONS_DIR")
    os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(root, name)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TORCH_EXTENSIONS_DIR", None)
        else:
            os.environ["TORCH_EXTENSIONS_DIR"] = before


def construction_device(device):
    """A context in which ModelNew's constructor runs: on PyTorch 2.x, `device` as the default
    device of tensor factories (torch.device is a context manager there), so that a large
    parameter is made and initialised where it will live. Its initial values do not matter:
    every parameter and buffer of the signature is overwritten with kforge's generated values
    before each call (map_parameters). On CPU, or PyTorch 1.x, nothing changes. At KernelBench
    L2/12 (an 8192 x 8192 Linear) the CPU initialisation took most of the gate's input time."""
    device = torch.device(device)
    if device.type == "cpu" or not hasattr(device, "__enter__"):
        return contextlib.nullcontext()
    return device


def load_source(path):
    """Executes the candidate source at `path` as a new module registered in sys.modules under
    a name of its content hash (Triton and load_inline look functions up by module), and
    returns it. CandidateFailure: compile_error for an unreadable file, a syntax error or an
    import that fails (a module absent here, or the candidate's own code raising while it
    loads: both mean it cannot be built on this machine)."""
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        raise CandidateFailure("compile_error", "cannot read candidate %s: %s" % (path, e))
    try:
        code = compile(source, path, "exec")
    except SyntaxError as e:
        raise CandidateFailure("compile_error", "%s:%s: syntax error: %s"
                               % (os.path.basename(path), e.lineno, e.msg))
    name = "kforge_candidate_" + hashlib.sha256(source).hexdigest()[:16]
    module = types.ModuleType(name)
    module.__file__ = os.path.abspath(path)
    sys.modules[name] = module
    try:
        with extensions_dir(name):
            exec(code, module.__dict__)
    except ImportError as e:
        sys.modules.pop(name, None)
        raise CandidateFailure("compile_error", "importing the candidate: %s"
                               % describe_exception(e))
    except Exception as e:
        sys.modules.pop(name, None)
        raise CandidateFailure("compile_error", "the candidate raised while loading: %s"
                               % describe_exception(e))
    return module


def model_new_class(module, path, model_signature):
    """The module's ModelNew, checked: an nn.Module subclass whose constructor takes Model's
    parameters (names in order). CandidateFailure wrong_signature otherwise."""
    cls = getattr(module, "ModelNew", None)
    if cls is None:
        raise CandidateFailure("wrong_signature", "%s defines no ModelNew (expected `class "
                               "ModelNew(nn.Module)`)" % os.path.basename(path))
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise CandidateFailure("wrong_signature", "%s: ModelNew is %s, expected a subclass of "
                               "torch.nn.Module" % (os.path.basename(path), type(cls).__name__))
    expected = [p.name for p in list(model_signature.parameters.values())[1:]]
    got_signature = inspect.signature(cls.__init__)
    got = [p.name for p in list(got_signature.parameters.values())[1:]]
    if got != expected:
        raise CandidateFailure(
            "wrong_signature", "%s: ModelNew.__init__%s differs from Model.__init__%s (a "
            "drop-in ModelNew takes the same constructor arguments)"
            % (os.path.basename(path), _signature_text(got_signature),
               _signature_text(model_signature)))
    return cls


def map_parameters(model, plan):
    """{signature index: ModelNew's parameter or buffer} for the plan's parameter/buffer
    entries: by name, else by position among ModelNew's tensors of that kind when it has as many
    as the signature lists. CandidateFailure wrong_signature naming what does not match."""
    tables = {"parameter": list(model.named_parameters()),
              "buffer": list(model.named_buffers())}
    found = {}
    for kind, table in tables.items():
        entries = [(i, e) for i, e in enumerate(plan) if e.source == kind]
        by_name = dict(table)
        if all(e.name in by_name for _, e in entries):
            pairs = [(i, e, by_name[e.name]) for i, e in entries]
        elif len(table) == len(entries):
            pairs = [(i, e, t) for (i, e), (_, t) in zip(entries, table)]
        else:
            missing = [e.name for _, e in entries if e.name not in by_name]
            raise CandidateFailure(
                "wrong_signature", "ModelNew has no %s %s and %d %s(s) where Model has %d "
                "(have: %s): it must hold Model's %ss, by name or in Model's order"
                % (kind, ", ".join("'%s'" % m for m in missing), len(table), kind, len(entries),
                   ", ".join(n for n, _ in table) or "none", kind))
        for i, entry, tensor in pairs:
            if tensor.numel() != entry.numel:
                raise CandidateFailure(
                    "wrong_signature", "ModelNew's %s for '%s' has %d elements (shape %s), "
                    "Model's has %d" % (kind, entry.name, tensor.numel(), list(tensor.shape),
                                        entry.numel))
            found[i] = tensor
    return found


class Candidate:
    """One loaded ModelNew with its task: the constructor checks what can be checked without a
    workload (the source imports, ModelNew exists with Model's constructor signature); build()
    makes the model of a workload."""

    def __init__(self, task, path):
        self.task = task
        self.path = path
        module = load_source(path)
        self.build_name = module.__name__  # its extensions folder (extensions_dir)
        self.cls = model_new_class(module, path, task.model_signature())
        self._model_key = None
        self._model = None

    def build(self, workload_name, seed, device):
        """ModelNew(*get_init_inputs()) at `workload_name` on `device`, built under
        torch.manual_seed(seed) at the first request of that workload and kept for every later
        seed (one module called on many inputs, as a user's model is: a candidate that caches
        the first result answers the second seed with it). CandidateFailure wrong_signature when
        the constructor refuses the arguments (TypeError), runtime_error when it raises
        otherwise."""
        key = (workload_name, str(device))
        if self._model_key == key:
            return self._model
        self._model_key, self._model = None, None
        args = self.task.init_args(workload_name)
        torch.manual_seed(seed)
        try:
            with extensions_dir(self.build_name), construction_device(device):
                model = self.cls(*args)
        except TypeError as e:
            raise CandidateFailure("wrong_signature", "ModelNew(*get_init_inputs()) at "
                                   "workload '%s': %s" % (workload_name, describe_exception(e)))
        except Exception as e:
            raise CandidateFailure("runtime_error", "building ModelNew at workload '%s': %s"
                                   % (workload_name, describe_exception(e)))
        if not isinstance(model, torch.nn.Module):
            raise CandidateFailure("wrong_signature", "ModelNew() is not an nn.Module")
        try:
            model = model.to(device)
        except Exception as e:
            raise CandidateFailure("runtime_error", "moving ModelNew to %s: %s"
                                   % (device, describe_exception(e)))
        self._model_key, self._model = key, model
        return model
