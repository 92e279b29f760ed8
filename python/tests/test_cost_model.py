"""Behaviour of bench/slurm/cost_model.py's queueing simulation (issue 23), not its timings:
stdlib only, a few tasks and GPUs, well under a second."""
import importlib.util
import os
import random
import sys
import unittest

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "slurm", "cost_model.py")
_SPEC = importlib.util.spec_from_file_location("cost_model", _PATH)
cost_model = importlib.util.module_from_spec(_SPEC)
sys.modules["cost_model"] = cost_model  # dataclasses look their module up
_SPEC.loader.exec_module(cost_model)


def driver(merge_s=(0.01, 0.05, 0.5)):
    return cost_model.DriverCosts(rows=[0, 1000, 10000], snapshot_s=[0.01, 0.01, 0.02],
                                  merge_s=list(merge_s), parse_s_per_line=1e-6,
                                  poll_interval_s=1.0, dispatch_s=2.0)


def tasks(count=40, seed=5):
    rng = random.Random(seed)
    out = []
    for i in range(count):
        device = rng.uniform(10, 300)
        out.append(cost_model.SimTask(f"t{i}", 1.0, device, 30 + device))
    return out


class SimulateTest(unittest.TestCase):
    def test_wall_at_least_the_work_over_the_gpus_and_the_longest_task(self):
        work = tasks()
        for gpus in (1, 3, 8, 100):
            run = cost_model.simulate(work, gpus, driver(), cost_model.Assumptions())
            self.assertGreaterEqual(run["suite_wall_s"], run["total_job_wall_s"] / gpus)
            self.assertGreaterEqual(run["suite_wall_s"], max(t.wall_s for t in work))

    def test_fractions_are_fractions(self):
        for gpus in (1, 8, 1000):
            run = cost_model.simulate(tasks(), gpus, driver(), cost_model.Assumptions())
            for key in ("gpu_device_utilization", "gpu_allocated_fraction",
                        "driver_busy_fraction", "driver_merge_fraction"):
                self.assertGreaterEqual(run[key], 0.0, key)
                self.assertLessEqual(run[key], 1.0, key)

    def test_a_slower_merge_makes_the_suite_longer(self):
        fast = cost_model.simulate(tasks(), 40, driver(), cost_model.Assumptions())
        slow = cost_model.simulate(tasks(), 40, driver((5.0, 10.0, 50.0)), cost_model.Assumptions())
        self.assertGreater(slow["suite_wall_s"], fast["suite_wall_s"])
        self.assertGreater(slow["driver_merge_fraction"], fast["driver_merge_fraction"])

    def test_more_gpus_never_slower_without_driver_costs(self):
        free = driver((0.0, 0.0, 0.0))
        walls = [cost_model.simulate(tasks(), n, free, cost_model.Assumptions())["suite_wall_s"]
                 for n in (1, 2, 4, 8)]
        self.assertEqual(walls, sorted(walls, reverse=True))

    def test_one_driver_split_is_the_plain_simulation(self):
        plain = cost_model.simulate(tasks(), 8, driver(), cost_model.Assumptions())
        split = cost_model.simulate_split(tasks(), 8, 1, driver(), cost_model.Assumptions())
        self.assertAlmostEqual(plain["suite_wall_s"], split["suite_wall_s"])
        self.assertEqual(split["combine_memories_s"], 0.0)

    def test_same_seed_same_tasks(self):
        model = cost_model.TaskModel(1.0, 0.5, 0.3, 10.0, 1.0)
        a = cost_model.make_tasks([1.0, 5.0], model, cost_model.Assumptions(), seed=3)
        b = cost_model.make_tasks([1.0, 5.0], model, cost_model.Assumptions(), seed=3)
        self.assertEqual([t.device_s for t in a], [t.device_s for t in b])

    def test_merge_interpolates_and_extrapolates_upward(self):
        costs = driver()
        self.assertAlmostEqual(costs.merge(500), 0.03)
        self.assertGreater(costs.merge(20000), costs.merge(10000))

    def test_saturation_falls_as_the_merge_grows(self):
        work = tasks()
        small = cost_model.saturation(work, driver(), cost_model.Assumptions(), 0)
        large = cost_model.saturation(work, driver(), cost_model.Assumptions(), 10000)
        self.assertGreater(small["saturating_gpus"], large["saturating_gpus"])


if __name__ == "__main__":
    unittest.main()
