"""Where a `derive --batch` child's time goes (issue 18's ingest target, H200 machine).

Forks one child per problem file, as `derive --batch` does, and in the child runs the derivation
under cProfile. Writes, per problem: wall and CPU seconds, the modules the child imported that the
parent had not (lazy imports repeat in every child), and the 25 functions of largest cumulative
time. --warm runs derive --batch's preload() in the parent first (what the batch does since
the 2026-12-04 evening). Usage: python3 bench/torch/profile_derive.py OUT_DIR [--warm] FILE...
"""
import cProfile
import io
import json
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))


def main():
    out_dir = sys.argv[1]
    warm = "--warm" in sys.argv
    files = [arg for arg in sys.argv[2:] if arg != "--warm"]
    os.makedirs(out_dir, exist_ok=True)
    start = time.perf_counter()
    import torch  # noqa: F401
    import_s = time.perf_counter() - start
    from kforge_torch import derive_batch
    import kforge_torch.derive  # noqa: F401
    import kforge_torch.families  # noqa: F401
    if warm:
        derive_batch.preload()
    parent_modules = set(sys.modules)
    tasks = os.listdir("/proc/self/task")
    threads = len(tasks)
    names = []
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    summary = {"import_torch_s": round(import_s, 3), "threads_before_fork": threads,
               "thread_names": names,
               "torch": torch.__version__, "num_threads": torch.get_num_threads(), "problems": []}
    for path in files:
        name = os.path.basename(path)
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            profile = cProfile.Profile()
            t0, c0 = time.perf_counter(), time.process_time()
            profile.enable()
            outcome = derive_batch._derive_here(os.path.abspath(path), {})
            profile.disable()
            seconds, cpu_s = time.perf_counter() - t0, time.process_time() - c0
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(25)
            new = sorted(set(sys.modules) - parent_modules)
            with open(os.path.join(out_dir, name + ".prof.txt"), "w") as f:
                f.write(f"seconds {seconds:.3f} cpu_s {cpu_s:.3f}\nnew modules ({len(new)}):\n")
                f.write("\n".join(new) + "\n\n" + text.getvalue())
            with os.fdopen(write_fd, "w") as pipe:
                json.dump({"file": name, "ok": "task" in outcome, "seconds": round(seconds, 3),
                           "cpu_s": round(cpu_s, 3), "new_modules": len(new)}, pipe)
            os._exit(0)
        os.close(write_fd)
        with os.fdopen(read_fd) as pipe:
            data = pipe.read()
        os.waitpid(pid, 0)
        row = json.loads(data) if data else {"file": name, "error": "no result"}
        print(json.dumps(row), flush=True)
        summary["problems"].append(row)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
