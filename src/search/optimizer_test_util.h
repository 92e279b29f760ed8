// Fakes shared by the optimizer's tests: an instant compiler, a worker with known payoffs, and
// a fixture with a toy kernel family (optimizer_test.cpp, optimizer_resume_test.cpp).
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.h"
#include "common/mapped_file.h"
#include "generation/templates_generator.h"
#include "memory/sqlite_store.h"
#include "search/optimizer.h"

namespace kforge::search::fakes {
namespace fs = std::filesystem;

// A compiler that "builds" instantly: the artifact path encodes the defines so the fake worker
// can look up the candidate's payoff. Sources containing BROKEN fail to compile.
class FakeCompiler : public compile::Compiler {
 public:
  compile::Artifact compile(const compile::CompileJob& job) override {
    compile::Artifact artifact;
    if (job.source.find("BROKEN") != std::string::npos) {
      artifact.verdict = Verdict::compile_error;
      artifact.log = "error: BROKEN";
      return artifact;
    }
    std::string path = job.source_name;
    for (const auto& [k, v] : job.defines) path += ";" + k + "=" + v;
    artifact.path = path;
    artifact.key = path;
    return artifact;
  }
  std::string toolchain(const std::string&) override { return "fake-cc 1.0"; }
};

// A load on the machine that both fakes (candidate and reference worker) see: a clock that
// every time() call of either advances, and a load that starts when a candidate worker first
// runs (gates) a kernel whose path contains `trigger` and lasts `ticks` time() calls: the
// reference's round before the candidate's first quick round and that round, for ticks 2. A
// load that comes within one candidate's window (issue 21).
struct SharedLoad {
  std::string trigger;
  int ticks = 2;
  double factor = 2.0;
  int clock = 0;
  int loaded_until = 0;  // time() calls up to this clock are loaded
  bool triggered = false;
};

// A worker whose timings follow a known payoff: base 10 ms, divided by ACCUMULATORS, halved by
// PARALLEL=1; the reference takes 20 ms. Kernels from "wrong.cpp" give wrong answers.
class FakeWorker : public worker::Worker {
 public:
  worker::DeviceInfo device_info() override {
    worker::DeviceInfo info;
    info.backend = "cpu";
    info.name = "fake cpu";
    info.memory_bytes = memory_bytes;
    return info;
  }
  worker::LoadResult load(const worker::LoadRequest& request, double) override {
    paths_.push_back(request.path);
    worker::LoadResult result;
    result.handle = static_cast<int>(paths_.size()) - 1;
    return result;
  }
  /// Every kernel writes y[i] = 1 + i / 1000, except those from wrong.cpp (zeros).
  worker::RunResult run(const worker::RunRequest& request, double) override {
    ++runs;
    if (shared_load && !shared_load->triggered &&
        paths_.at(request.handle).find(shared_load->trigger) != std::string::npos) {
      shared_load->triggered = true;
      shared_load->loaded_until = shared_load->clock + shared_load->ticks;
    }
    const bool wrong = paths_.at(request.handle).find("wrong.cpp") != std::string::npos;
    const int64_t n = request.workload.dims.at("n");
    worker::RunResult result;
    result.output_bytes = n * 4;
    result.calls_completed = request.calls;
    MappedFile file(request.output_path, MappedFile::Mode::write, n * 4 * request.calls);
    auto* y = reinterpret_cast<float*>(file.data());
    for (int64_t i = 0; i < n * request.calls; ++i) {
      y[i] = wrong ? 0.0f : 1.0f + static_cast<float>(i % n) / 1000.0f;
    }
    return result;
  }
  worker::TimeResult time(const worker::TimeRequest& request, double) override {
    ++times;
    if (crash_at_time == times) throw Error("simulated orchestrator crash");
    if (died_at_times.contains(times)) {
      worker::TimeResult died;
      died.verdict = Verdict::worker_crashed;
      died.message = "worker process died (simulated kill -9)";
      return died;
    }
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms));
    if (request.policy.min_repetitions == full_rung_repetitions) {
      ++full_times;
      if (crash_at_full_time == full_times) throw Error("simulated crash in rung 2");
    }
    const std::string& path = paths_.at(request.handle);
    double ms = 10.0;
    if (path.find("reference") != std::string::npos) ms = 20.0;
    auto value = [&](const std::string& key) {
      auto at = path.find(key + "=");
      return at == std::string::npos ? 1.0 : std::stod(path.substr(at + key.size() + 1));
    };
    ms /= value("KF_ACCUMULATORS");
    if (value("KF_PARALLEL") == 1.0 && path.find("KF_PARALLEL") != std::string::npos) ms /= 2;
    if (slow_on && slow_on(path, request.workload.name)) ms *= 100;
    if (loaded_times.contains(times)) ms *= load_factor;
    if (shared_load && ++shared_load->clock <= shared_load->loaded_until) ms *= shared_load->factor;
    worker::TimeResult result;
    for (int i = 0; i < request.policy.min_repetitions; ++i) {
      result.samples_ms.push_back(ms * (1 + 0.001 * (i % 3)));
    }
    // Checked calls: the same outputs as run() (they do not depend on the inputs), each written.
    const bool wrong = path.find("wrong.cpp") != std::string::npos;
    const int64_t n = request.workload.dims.at("n");
    for (size_t k = 0; k < request.checks.size(); ++k) {
      const worker::TimedCheck& check = request.checks[k];
      MappedFile file(request.check_path + "." + std::to_string(k), MappedFile::Mode::write, n * 4);
      auto* y = reinterpret_cast<float*>(file.data());
      for (int64_t i = 0; i < n; ++i) y[i] = wrong ? 0.0f : 1.0f + static_cast<float>(i) / 1000.0f;
      const uint64_t own = request.seed + static_cast<uint64_t>(check.call % request.input_sets);
      result.checked.push_back({check.call, check.overwrite ? check.seed : own,
                                check.overwrite ? check.distribution : request.distribution,
                                wrong ? 1u : 2u, 0, -1});
    }
    return result;
  }
  void shutdown() override {}
  int runs = 0;
  int times = 0;
  /// The time() call (1-based) that throws, as if the orchestrator died there; 0: none.
  int crash_at_time = 0;
  /// time() calls (1-based) whose worker process dies: they return worker_crashed.
  std::set<int> died_at_times;
  /// Rung-2 time() calls (recognized by the full policy's repetitions) so far, and the one
  /// (1-based) that throws; 0: none.
  int full_times = 0;
  int crash_at_full_time = 0;
  /// A rung-2 request is told by its repetitions (one of rung 2's rounds: fewer than a quick
  /// rung's, more than a reference window's).
  int full_rung_repetitions =
      evaluation::full_round_measurement(evaluation::EvaluationPolicy{}).min_repetitions;
  int64_t memory_bytes = 0;  // 0: unknown (no fit check)
  double delay_ms = 0.0;     // real time each time() call takes (a slower device)
  /// time() calls (1-based) made while the machine is "loaded": their samples are load_factor
  /// times slower (a reference timed once under load, issue 21).
  std::set<int> loaded_times;
  double load_factor = 2.0;
  SharedLoad* shared_load = nullptr;  // a load both workers see; none if null
  /// Candidates (by artifact path) that run 100x slower on a workload.
  std::function<bool(const std::string& path, const std::string& workload)> slow_on;

 private:
  std::vector<std::string> paths_;
};

class OptimizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("kforge_opt_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::path family = root_ / "kernels" / "cpu" / "toy";
    fs::create_directories(family);
    std::ofstream(family / "serial.cpp") << "serial\n";
    std::ofstream(family / "simd.cpp") << "simd\n";
    std::ofstream(family / "wrong.cpp") << "wrong\n";
    std::ofstream(family / "family.toml") << R"(
family = "toy"
backend = "cpu"
[[variants]]
name = "serial"
source = "serial.cpp"
decomposition = "row_serial"
[[variants]]
name = "simd"
source = "simd.cpp"
decomposition = "row_simd"
[variants.params]
ACCUMULATORS = [1, 2, 4, 8]
PARALLEL = [0, 1]
[[variants]]
name = "tiled"
source = "wrong.cpp"
decomposition = "row_tiled"
)";
    std::ofstream(root_ / "reference.cpp") << "reference\n";
    task_.name = "toy";
    task_.family = "toy";
    task_.source_path = (root_ / "reference.cpp").string();
    task_.reference_paths["cpu"] = (root_ / "reference.cpp").string();
    task_.signature.tensors = {{"x", TensorRole::input, DType::f32, {"n"}},
                               {"y", TensorRole::output, DType::f32, {"n"}}};
    task_.workloads = {{"small", {{"n", 33}}, false}, {"big", {{"n", 1 << 20}}, true}};
    store_ = memory::SqliteStore::open(":memory:",
                                       fs::path(KFORGE_SOURCE_DIR) / "knowledge" / "seed.toml");
  }
  void TearDown() override {
    if (!std::getenv("KFORGE_TEST_KEEP")) fs::remove_all(root_);
  }

  OptimizeResult run(OptimizeOptions options, std::vector<std::string>* lines = nullptr) {
    return run_in(root_ / ("run" + std::to_string(runs_++)), options, worker_, lines);
  }

  /// One run in `dir` (created, or reopened when options.resume) with `worker` running the
  /// candidates; `setup` may set the optimizer's interrupts, clock or cost meter.
  OptimizeResult run_in(const fs::path& dir, OptimizeOptions options, FakeWorker& worker,
                        std::vector<std::string>* lines = nullptr,
                        const std::function<void(Optimizer&)>& setup = {}) {
    return run_pool(dir, options, {&worker}, lines, setup);
  }

  /// run_in with a pool of candidate workers.
  OptimizeResult run_pool(const fs::path& dir, OptimizeOptions options,
                          std::vector<worker::Worker*> workers,
                          std::vector<std::string>* lines = nullptr,
                          const std::function<void(Optimizer&)>& setup = {}) {
    generation::TemplatesGenerator generator(
        generation::load_family((root_ / "kernels").string(), "cpu", "toy"));
    report::RunDirectory run_dir(dir, options.resume ? report::RunDirectory::Mode::resume
                                                     : report::RunDirectory::Mode::create);
    RealPlane plane = make_real_plane(task_, "cpu", options, policy_,
                                      compiler_, workers, reference_worker_);
    Optimizer optimizer(task_, "cpu", options, *store_, generator, *plane.evaluator, *plane.pool,
                        workers, reference_worker_, run_dir,
                        [&](const std::string& line) {
                          if (lines) lines->push_back(line);
                          if (on_line_) on_line_(line);
                          if (std::getenv("KFORGE_TEST_VERBOSE")) std::fprintf(stderr, "%s\n", line.c_str());
                        });
    if (profiler_) optimizer.set_profiler(profiler_);
    if (setup) setup(optimizer);
    return optimizer.run();
  }

  /// A fresh, empty memory (seed knowledge only).
  void fresh_store() {
    store_ = memory::SqliteStore::open(":memory:",
                                       fs::path(KFORGE_SOURCE_DIR) / "knowledge" / "seed.toml");
  }

  fs::path root_;
  Task task_;
  FakeCompiler compiler_;
  FakeWorker worker_;
  FakeWorker reference_worker_;
  evaluation::EvaluationPolicy policy_;  // the plane's policy
  std::unique_ptr<memory::SqliteStore> store_;
  evaluation::Profiler* profiler_ = nullptr;
  std::function<void(const std::string&)> on_line_;  // sees every progress line as it comes
  int runs_ = 0;
};


/// Events of one kind from a run directory's events.jsonl.
inline std::vector<nlohmann::json> events_of(const fs::path& run, const std::string& kind) {
  std::vector<nlohmann::json> found;
  std::ifstream in(run / "events.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json event = nlohmann::json::parse(line);
    if (event.value("event", "") == kind) found.push_back(event);
  }
  return found;
}

}  // namespace kforge::search::fakes
