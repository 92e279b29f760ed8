"""How long the torch reference worker takes to hand a large output to the orchestrator.

The worker writes every expected output to a file (the orchestrator compares candidates with it;
expected outputs never enter a candidate's process). On the H200 a 6.4 GB output (KernelBench 19,
4096 x 393216 f32) took 13-15 s per reference run in a suite's prepare (bench/torch/README.md,
2026-12-04 evening). This times the parts of that hand-over for one CUDA tensor of ELEMENTS f32
values, each way of writing it to a file under each FOLDER:
  tobytes:  tensor.to("cpu") then .numpy().tobytes() then one write (the worker before)
  buffer:   tensor.to("cpu") then a write of the numpy buffer (no bytes copy)
  chunked:  copy CHUNK_MB at a time into one pinned host buffer, write each (no whole host copy)
Usage: python3 bench/torch/expected_io.py OUT.json [ELEMENTS] [FOLDER...]
"""
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from kforge_torch import inputs  # noqa: E402


def timed(fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return round(time.perf_counter() - start, 3)


def main():
    out_path = sys.argv[1]
    elements = int(float(sys.argv[2])) if len(sys.argv) > 2 else 4096 * 393216
    folders = sys.argv[3:] or ["/tmp", "/dev/shm"]
    x = torch.rand(elements, device="cuda")
    record = {"elements": elements, "gb": round(elements * 4 / 1e9, 2), "torch": torch.__version__,
              "runs": []}
    for folder in folders:
        path = os.path.join(folder, "kforge_expected_io.bin")
        row = {"folder": folder}
        holder = {}
        row["d2h_s"] = timed(lambda: holder.update(host=x.to("cpu")))
        row["tobytes_s"] = timed(lambda: holder.update(data=holder["host"].numpy().tobytes()))
        with open(path, "wb") as f:
            row["write_bytes_s"] = timed(lambda: f.write(holder["data"]))
        del holder["data"]
        os.unlink(path)
        with open(path, "wb") as f:
            row["write_buffer_s"] = timed(lambda: f.write(memoryview(holder["host"].numpy())))
        holder.clear()
        os.unlink(path)
        with open(path, "wb") as f:
            row["chunked_s"] = timed(lambda: inputs.write_raw(x, f))
        os.unlink(path)
        print(json.dumps(row), flush=True)
        record["runs"].append(row)
    with open(out_path, "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
