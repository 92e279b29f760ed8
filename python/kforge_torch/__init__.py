"""kforge's PyTorch side: KernelBench-format problems as kforge tasks (docs/torch_tasks.md).

Modules: inputs (kforge's generated inputs as tensors), problem_module (load a problem file with
constants rebound), worker (the reference worker behind protocol v2).
"""
