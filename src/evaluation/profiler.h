// Hardware profiling of the final candidate (the ladder's last rung, DESIGN.md: "final with
// profiling"): one call of the kernel at a timed workload under NVIDIA Nsight Compute, in a
// worker process of its own, with the counters that place it on the roofline and say what limits
// it (KernelBrain's profiler-guided diagnosis, section 3).
//
// The profiled worker generates its inputs on the host (RunRequest::host_inputs), so every kernel
// ncu sees is the candidate's. A Python candidate (a KernelBench ModelNew .py) runs in the Python
// candidate worker instead, where PyTorch itself launches kernels (input copies, parameter
// copies): there one warm-up call runs first (Triton autotuning, lazy initialization), then one
// call whose forward alone is inside the NVTX range kProfiledRange (RunRequest::nvtx_range), and
// ncu counts only the kernels launched in that range. Profiling is advice, never a verdict: when
// ncu is missing or cannot read the counters (a virtualized GPU, a driver that restricts
// profiling to administrators), the report says so and the run goes on.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/scratch_dir.h"
#include "compile/compiler.h"
#include "core/task.h"
#include "worker/worker_client.h"

namespace kforge::evaluation {

/// The counters asked for, by Nsight Compute metric name (all "base" units: ns, bytes, %).
/// gpu__time_duration.sum: kernel duration; dram__bytes_read.sum / dram__bytes_write.sum: HBM
/// traffic; dram__throughput / sm__throughput / gpu__compute_memory_throughput
/// .avg.pct_of_peak_sustained_elapsed: "speed of light" of memory, SMs and the busiest memory
/// unit; sm__warps_active.avg.pct_of_peak_sustained_active: achieved occupancy;
/// lts__t_sector_hit_rate.pct: L2 hit rate; launch__registers_per_thread,
/// launch__occupancy_limit_registers and friends: what bounds occupancy.
const std::vector<std::string>& profile_metrics();

/// One kernel launch as ncu measured it.
struct KernelProfile {
  std::string name;                        // demangled function name
  std::string grid;                        // "(x, y, z)"
  std::string block;                       // "(x, y, z)"
  std::map<std::string, double> metrics;   // metric name -> value in base units
};

/// What the final rung's profiling found.
struct ProfileReport {
  bool ok = false;             // counters were read for at least one kernel
  std::string message;         // why not, when !ok ("ncu not found", its error output)
  std::string workload;        // the workload profiled
  std::vector<KernelProfile> kernels;
  double seconds = 0.0;        // wall time of the profiling run
  /// One line per finding, for people and for the generator's next prompt: the limiter (DRAM
  /// bandwidth, SM throughput, latency), DRAM traffic against the task's minimum bytes, occupancy
  /// and its limit. Empty when !ok.
  std::vector<std::string> diagnosis;
  nlohmann::json to_json() const;
};

/// Rows of `ncu --csv --page raw --print-units base` output: the line starting with "ID" names
/// the columns, the next gives units, each later line is one kernel; ncu's own "==PROF==" lines
/// and anything before the header are skipped. Metric columns that are not numbers (names,
/// "n/a") are left out of `metrics`. Throws Error when there is no header line.
std::vector<KernelProfile> parse_ncu_csv(std::string_view text);

/// Findings for `kernels` (summed over launches), given the minimum bytes one call must move
/// (Task::bytes formula or inputs + outputs). Thresholds: a unit above 60% of its peak is the
/// limiter (Nsight Compute's own "Speed of Light" rule of thumb); both below 60% is latency-bound.
std::vector<std::string> diagnose(const std::vector<KernelProfile>& kernels,
                                  double minimum_bytes);

/// The inputs of the profiled call: the seed, and where the task's provided inputs of that
/// seed are (worker/provided_inputs.h; "" when it has none). EvaluationPlane::profile_inputs.
struct ProfileInputs {
  uint64_t seed = 1;
  std::string provided_dir;
  /// The derived task JSON a Python candidate is loaded with (LoadRequest::task_path); "" for a
  /// task without a PyTorch reference.
  std::string task_path;
};

/// The NVTX push/pop range (default domain) the Python candidate worker opens around the
/// profiled forward call.
inline constexpr const char* kProfiledRange = "kforge_profiled_forward";

/// ncu's command line, up to the profiled program: CSV of the raw page in base units to
/// `log_path`, the device's own clocks (--clock-control none, as during timing), every process
/// of the tree (--target-processes all: the worker may run under a sandbox launcher, Python may
/// fork), the profile_metrics(); with a non-empty `nvtx_range` only the kernels launched inside
/// that push/pop range (`--nvtx --nvtx-include "<range>/"`, the slash naming a push/pop range).
std::vector<std::string> ncu_command(const std::string& ncu_path, const std::string& log_path,
                                     const std::string& nvtx_range = "");

/// Runs candidates under Nsight Compute. The seam tests fake.
class Profiler {
 public:
  virtual ~Profiler() = default;
  /// Profiles one call of `candidate` on `workload` with `inputs`. Never throws for a profiling
  /// failure (the report carries it); throws Error only for a programming error (no such
  /// workload).
  virtual ProfileReport profile(const compile::Artifact& candidate, const Task& task,
                                const Workload& workload, const ProfileInputs& inputs) = 0;
};

/// Where ncu is: $PATH, then $CUDA_HOME/bin and /usr/local/cuda/bin; nullopt when absent.
std::optional<std::string> find_ncu();

class NcuProfiler final : public Profiler {
 public:
  /// `worker` is the configuration of the profiled worker (binary, backend, device, limits);
  /// its launcher is replaced by ncu. `ncu_path` from find_ncu(). Files go under `scratch`.
  NcuProfiler(worker::ProcessWorkerConfig worker, std::string ncu_path, ScratchDir& scratch,
              double timeout_s = 300.0);
  /// Profiles Python candidates (a ModelNew .py artifact, worker::is_python_candidate) too, in
  /// the Python candidate worker `python` (cli::WorkerConfigs::python_candidate), loading each
  /// with ProfileInputs::task_path and allowing its load `load_timeout_s` (the import may build
  /// a load_inline extension). Without it a Python candidate's report says it is not profiled.
  void set_python_worker(worker::ProcessWorkerConfig python, double load_timeout_s = 600.0);
  ProfileReport profile(const compile::Artifact& candidate, const Task& task,
                        const Workload& workload, const ProfileInputs& inputs) override;

 private:
  worker::ProcessWorkerConfig worker_;
  std::optional<worker::ProcessWorkerConfig> python_worker_;
  double python_load_timeout_s_ = 600.0;
  std::string ncu_path_;
  ScratchDir& scratch_;
  double timeout_s_;
};

}  // namespace kforge::evaluation
