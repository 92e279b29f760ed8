"""Helpers of the worker tests: derived task files for the problems under tests/problems, a
worker subprocess driven like the C++ client drives it, and the outputs torch computes."""

import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile

import torch

from kforge_torch import inputs
from kforge_torch.problem_module import load_problem

TESTS = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(TESTS)
PROBLEMS = os.path.join(TESTS, "problems")


def problem(name):
    """Absolute path of tests/problems/NAME.py."""
    return os.path.join(PROBLEMS, name + ".py")


def tensor(name, role, shape, dtype="f32"):
    """A signature tensor in its JSON form."""
    return {"name": name, "role": role, "dtype": dtype, "shape": shape, "strided": False}


def write_task(directory, problem_path, tensors, sources, workloads, double_reference=True,
               scalars=(), torch_scalars=()):
    """Writes a derived task file (docs/torch_tasks.md) and returns its dict (with "path").

    workloads: {name: (dims, constants, module shapes)}; scalars: signature scalars
    ({"name", "dtype", "value"}); torch_scalars: the torch.scalars entries."""
    with open(problem_path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    task = {
        "format": "kforge-torch-task", "version": 1,
        "name": os.path.splitext(os.path.basename(problem_path))[0], "description": "",
        "problem": problem_path, "problem_sha256": sha, "family": "", "family_match": {},
        "family_misses": {}, "signature": {"tensors": tensors, "scalars": list(scalars)},
        "workloads": [{"name": w, "dims": dims, "timed": False}
                      for w, (dims, _, _) in workloads.items()],
        "tolerance": {"rtol": 1e-4, "atol": 1e-6}, "distributions": ["uniform"],
        "flops": "", "bytes": "",
        "torch": {"tensors": sources, "scalars": list(torch_scalars),
                  "double_reference": double_reference,
                  "workloads": {w: {"constants": constants, "shapes": shapes}
                                for w, (_, constants, shapes) in workloads.items()}},
        "input_rules": [], "notes": [], "warnings": []}
    path = os.path.join(directory, task["name"] + ".task.json")
    with open(path, "w") as f:
        json.dump(task, f)
    task["path"] = path
    return task


def expected_bytes(task, workload, seed, distribution="uniform", double=None, device="cpu",
                   remap="none"):
    """What forward computes for the task's generated inputs at `workload`, as the bytes of the
    outputs in signature order and dtype: the test's own computation, independent of the
    worker's code paths (only the generator and the module loader are shared). `remap`: a
    self-test probe, with each tensor's first module dimension as its rows (the fixtures'
    module shapes are their signature shapes)."""
    spec = task["torch"]["workloads"][workload]
    double = task["torch"]["double_reference"] if double is None else double
    module = load_problem(task["problem"], spec["constants"])
    torch.manual_seed(seed)
    with contextlib.redirect_stdout(io.StringIO()):  # the module's prints
        model = module.Model(*module.get_init_inputs()).to(device)
    if double:
        model = model.double()
    args = {}
    tensors = task["signature"]["tensors"]
    for i, (t, where) in enumerate(zip(tensors, task["torch"]["tensors"])):
        if where["source"] == "output":
            continue
        shape = spec["shapes"][i]
        value = inputs.generate(t["dtype"], shape, seed, i, distribution, device, remap=remap,
                                rows=shape[0] if shape else 1)
        if double and value.is_floating_point():
            value = value.double()
        if where["source"] == "input":
            args[where["index"]] = value
        else:
            with torch.no_grad():
                dict(model.named_parameters())[where["name"]].copy_(value)
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
        returned = model(*[args[k] for k in sorted(args)])
    if isinstance(returned, torch.Tensor):
        returned = [returned]
    data = b""
    for t, where in zip(tensors, task["torch"]["tensors"]):
        if where["source"] == "output":
            data += inputs.raw_bytes(returned[where["index"]].to(inputs.TORCH_DTYPES[t["dtype"]]))
    return data


class WorkerProcess:
    """`python3 -m kforge_torch worker` as a subprocess; its stderr goes to a temporary file."""

    command = "worker"  # the kforge_torch subcommand this class starts

    def __init__(self, backend="cpu", device=0, token="0123456789abcdef0123456789abcdef"):
        self.token = token
        self.stderr = tempfile.TemporaryFile()
        environment = dict(os.environ)
        environment["PYTHONPATH"] = PYTHON_DIR + os.pathsep + environment.get("PYTHONPATH", "")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kforge_torch", self.command, "--backend", backend,
             "--device", str(device)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=environment)
        self.next_id = 1

    def send_line(self, line):
        """Writes one raw line and returns the parsed reply line."""
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()
        reply = self.process.stdout.readline()
        if not reply:
            raise AssertionError("the worker closed its channel; stderr: " + self.stderr_text())
        return json.loads(reply)

    def request(self, cmd, **fields):
        """Sends {"cmd": cmd, "id": n, **fields}; returns the reply after checking its id (and
        token, after hello)."""
        fields.update(cmd=cmd, id=self.next_id)
        if cmd == "hello":
            fields.setdefault("token", self.token)
        self.next_id += 1
        reply = self.send_line(json.dumps(fields))
        if reply.get("id") != fields["id"] or reply.get("token") != self.token:
            raise AssertionError("reply %r does not answer request %d" % (reply, fields["id"]))
        return reply

    def stderr_text(self):
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")

    def close(self, timeout=30):
        """Closes stdin (EOF) and returns the exit status."""
        if self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            return self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self.process.stdout.close()
            self.stderr.close()
