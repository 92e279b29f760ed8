#include "evaluation/evaluator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "backends/backend.h"
#include "common/error.h"
#include "common/files.h"
#include "common/mapped_file.h"
#include "evaluation/source_policy.h"
#include "evaluation/tolerance.h"
#include "evaluation/model_new_check.h"
#include "task/task_loader.h"
#include "task/torch_task.h"
#include "worker/candidate_router.h"
#include "worker/host_data.h"
#include "worker/kernel_runner.h"
#include "worker/provided_inputs.h"

namespace kforge::evaluation {
namespace {

// What the Python screen knows of `task`: its family's torch ops, and the problem module (a
// PyTorch reference's file stem) with the ops the problem itself calls.
PythonScreen python_screen_for(const Task& task) {
  std::string problem_source;
  std::string problem_module;
  if (auto found = task.reference_paths.find("torch"); found != task.reference_paths.end()) {
    const std::filesystem::path problem(found->second);
    problem_module = problem.stem().string();
    if (std::filesystem::is_regular_file(problem)) problem_source = read_file(problem);
  }
  return {forbidden_torch_ops(task.family, problem_source), problem_module};
}

/// Flat index of the first NaN or infinite element of a `dtype` buffer, or -1 (integers: -1).
int64_t first_non_finite(DType dtype, std::span<const std::byte> bytes) {
  if (!is_floating(dtype)) return -1;
  const auto elements = static_cast<int64_t>(bytes.size()) / dtype_size(dtype);
  for (int64_t e = 0; e < elements; ++e) {
    if (!std::isfinite(worker::element_as_double(dtype, bytes.data(), e))) return e;
  }
  return -1;
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string format_gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", bytes / (1 << 30));
  return text;
}

nlohmann::json timing_json(const TimingVerdict& timing) {
  return {{"summary", timing.summary},
          {"setup_s", timing.setup_ms / 1e3},
          {"samples_ms", timing.samples_ms},
          {"throttled_dropped", timing.throttled_dropped},
          {"host_gap_ms", timing.host_gap_ms},
          {"floor_ms", timing.floor.floor_ms},
          {"stop_reason", timing.stop_reason},
          {"slow_warmup", timing.slow_warmup},
          {"warning", timing.warning}};
}

/// Room the exchanged files need at once: the largest workload's outputs kept as expected (for
/// its gate case and for each rotated input set that checked calls run on), the candidate's two
/// calls, and the outputs of a timing request's checked calls; plus the provided inputs
/// (Evaluator::provide_inputs), kept for the run: on a timed workload its gate case's and each
/// rotated set's.
int64_t scratch_bytes_needed(const Task& task, const EvaluationPolicy& policy) {
  int64_t needed = 0;
  int64_t provided = 0;
  for (const Workload& workload : task.workloads) {
    int64_t bytes = 0;
    for (const OutputLayout& output : output_layout(task.signature, workload)) bytes += output.bytes;
    // Rotated sets only below the rotation limit (Evaluator::input_sets_for).
    const bool rotated = static_cast<double>(min_bytes_moved(task.signature, workload)) <=
                         policy.rotation_limit_bytes;
    const int sets = rotated ? policy.input_sets : 1;
    needed = std::max(needed, (4 + sets + policy.checks_per_request) * bytes);
    if (!workload.timed) continue;
    for (int i : worker::provided_tensors(task.signature)) {
      const TensorSpec& spec = task.signature.tensors[static_cast<size_t>(i)];
      provided += (1 + sets) * worker::element_count(bind_shape(spec, workload)) *
                  dtype_size(spec.dtype);
    }
  }
  return needed + provided;
}

}  // namespace

void to_json(nlohmann::json& j, const RungRecord& record) {
  j = {{"rung", to_string(record.rung)},
       {"verdict", to_string(record.verdict)},
       {"message", record.message},
       {"seconds", record.seconds},
       {"detail", record.detail}};
}

std::vector<double> pooled_rounds(const std::vector<std::vector<double>>& rounds) {
  std::vector<double> all;
  for (const std::vector<double>& round : rounds) all.insert(all.end(), round.begin(), round.end());
  return all;
}

void to_json(nlohmann::json& j, const QuickReference& window) {
  j = {{"rounds_ms", window.rounds_ms},
       {"candidate_rounds", window.candidate_rounds},
       {"median_ms", window.median_ms},
       {"speedup", window.speedup},
       {"outcome", to_string(window.outcome)},
       {"seconds", window.seconds}};
}

void from_json(const nlohmann::json& j, QuickReference& window) {
  if (j.contains("rounds_ms")) {
    j.at("rounds_ms").get_to(window.rounds_ms);
    j.at("candidate_rounds").get_to(window.candidate_rounds);
  } else {  // recorded before rung 1 interleaved: R C R
    window.rounds_ms = {j.at("before_ms").get<std::vector<double>>(),
                        j.at("after_ms").get<std::vector<double>>()};
    window.candidate_rounds = 1;
  }
  j.at("median_ms").get_to(window.median_ms);
  j.at("speedup").get_to(window.speedup);
  window.outcome = parse_comparison_outcome(j.at("outcome").get<std::string>());
  j.at("seconds").get_to(window.seconds);
}

std::vector<double> EvaluationPlane::PairedSamples::reference_ms() const {
  return pooled_rounds(reference_rounds);
}

std::vector<double> EvaluationPlane::PairedSamples::candidate_ms() const {
  return pooled_rounds(candidate_rounds);
}

Evaluator::Evaluator(worker::Worker& candidates, worker::Worker& reference, const Task& task,
                     EvaluationPolicy policy)
    : candidates_(candidates),
      reference_worker_(reference),
      task_(task),
      policy_(policy),
      scratch_(std::make_unique<ScratchDir>("kforge-eval", scratch_bytes_needed(task, policy))) {
  for (const Workload& workload : task.workloads) {
    if (workload.timed) {
      timed_workload_ = workload;
      break;
    }
  }
  if (timed_workload_.name.empty()) throw Error(task.source_path + ": no timed workload");
  oracle_ = std::make_unique<ReferenceOracle>(reference_worker_, task_, *scratch_,
                                              policy_.run_timeout_s);
  gate_cases_ = plan_gate(task_, policy_.gate);
  timing_seed_ = policy_.gate.base_seed + 5000;
  checks_ = std::make_unique<TimedChecks>(task_, *oracle_, TimedChecks::random_secret());
  python_screen_ = python_screen_for(task_);
  const auto problem = task_.reference_paths.find("torch");
  if (problem != task_.reference_paths.end() && std::filesystem::is_regular_file(problem->second)) {
    problem_source_ = read_file(problem->second);
  }
}

Evaluator::~Evaluator() = default;

const GateCase& Evaluator::timed_case(const std::string& workload_name) const {
  for (const GateCase& gate_case : gate_cases_) {
    if (gate_case.workload.name == workload_name && gate_case.workload.timed) return gate_case;
  }
  throw Error("no gate case for timed workload '" + workload_name + "'");
}

TaskReport Evaluator::prepare(const compile::Artifact& reference) {
  const auto start = Clock::now();
  TaskReport report;
  auto phase_start = start;
  const auto end_phase = [&](const char* name) {
    const auto now = Clock::now();
    report.phases.emplace_back(name, std::chrono::duration<double>(now - phase_start).count());
    phase_start = now;
  };
  device_ = reference_worker_.device_info();
  candidates_.device_info();  // start it now: a worker that cannot start stops the run here
  end_phase("workers");
  report.device = device_;
  policy_.checks.floor_rejects = backends::get_backend(device_.backend).can.physical_floor;
  // Every workload's tensors must fit the device, with room for the harness.
  for (const Workload& workload : task_.workloads) {
    const auto bytes = static_cast<double>(min_bytes_moved(task_.signature, workload));
    if (device_.memory_bytes > 0 && bytes > 0.9 * static_cast<double>(device_.memory_bytes)) {
      throw Error(task_.source_path + ": workload '" + workload.name + "' needs " +
                  format_gib(bytes) + " for its tensors; " + device_.backend + ":" +
                  std::to_string(device_.device_index) + " (" + device_.name + ") has " +
                  format_gib(static_cast<double>(device_.memory_bytes)));
    }
  }
  oracle_->load(reference);
  if (task_.has_torch_reference()) candidate_task_path_ = reference.path;
  end_phase("reference_load");
  provide_inputs();
  end_phase("provided_inputs");
  drop_non_finite_adversarial(report.warnings);
  std::vector<std::vector<std::vector<std::byte>>> input_bytes;  // kept alive for the spans
  std::vector<SelfTestInput> self_test_inputs;
  for (const GateCase& gate_case : gate_cases_) {
    const ExpectedOutputs& expected = oracle_->expected(gate_case);
    if (gate_case.workload.timed || gate_case.padded) continue;  // small, compact cases only
    SelfTestInput input;
    input.label = gate_case.label();
    auto& inputs = input_bytes.emplace_back();
    inputs.reserve(task_.signature.tensors.size());
    for (size_t i = 0; i < task_.signature.tensors.size(); ++i) {
      const TensorSpec& spec = task_.signature.tensors[i];
      if (spec.role != TensorRole::input) continue;
      const std::vector<int64_t> shape = bind_shape(spec, gate_case.workload);
      if (spec.provided) {
        std::vector<std::byte>& bytes = inputs.emplace_back(
            static_cast<size_t>(worker::element_count(shape) * dtype_size(spec.dtype)));
        worker::read_provided_input(oracle_->provided_dir(), gate_case.workload.name,
                                    gate_case.seed, static_cast<int>(i), spec.name, bytes.data(),
                                    static_cast<int64_t>(bytes.size()));
      } else {
        inputs.push_back(worker::make_input(
            spec.dtype, worker::element_count(shape), gate_case.seed, static_cast<int>(i),
            worker::parse_input_distribution(gate_case.distribution)));
      }
      input.inputs.push_back({spec.name, spec.dtype, shape, inputs.back()});
    }
    for (const OutputLayout& output : output_layout(task_.signature, gate_case.workload)) {
      const TensorSpec& spec = task_.signature.tensors[output.tensor];
      input.expected_outputs.push_back(
          {spec.name, spec.dtype, output.shape, expected.file.bytes(output.offset, output.bytes)});
      input.tolerances.push_back(
          tolerance_for(task_.tolerance, spec.dtype, gate_case.workload.name));
    }
    input.probes = probes(gate_case);
    self_test_inputs.push_back(std::move(input));
  }
  end_phase("gate_outputs");
  if (!self_test_inputs.empty()) {
    report.self_test = self_test_outputs(self_test_inputs);
    if (!report.self_test.reference_passes) {
      throw Error(task_.source_path +
                  ": the reference fails its own self-test (its outputs do not pass against "
                  "themselves under the task's tolerance)");
    }
    for (const std::string& weakness : report.self_test.weaknesses) {
      report.warnings.push_back("weak task: " + weakness);
    }
  } else {
    report.warnings.push_back(
        "no gate (untimed) workloads: the self-test and the two-call race check did not run; "
        "add small and odd-sized workloads (e.g. 1, 31, 33, 4097)");
  }
  end_phase("self_test");
  report.floor = physical_floor(task_, timed_workload_, device_, policy_.checks.floor_slack);
  prime_check_outputs(timed_workload_);
  end_phase("timed_outputs");
  report.compile = prepare_compile_baseline(report.warnings);
  end_phase("compile_baseline");
  report.seconds = seconds_since(start);
  return report;
}

bool fp32_rule_applies(const Task& task, const std::string& backend) {
  if (task.precision != "fp32") return false;
  if (task.has_torch_reference()) {
    const nlohmann::json& torch = task.torch_reference.value("torch", nlohmann::json::object());
    return torch.value("fp32_model", false) && torch.value("double_reference", false);
  }
  return !task.fp32_model_defines.empty() && task.reference_paths.contains(backend);
}

std::optional<compile::Artifact> fp32_model_artifact(
    const Task& task, const std::string& backend,
    const std::function<compile::Artifact(const compile::CompileJob&)>& build,
    const std::string& dir) {
  if (!fp32_rule_applies(task, backend)) return std::nullopt;
  if (task.has_torch_reference()) {
    nlohmann::json model = derived_json(task);
    model["torch"]["double_reference"] = false;
    model["torch"]["fp32_model_run"] = true;
    compile::Artifact artifact;
    artifact.path = (std::filesystem::path(dir) / "reference.fp32_model.torch.json").string();
    write_file_atomically(artifact.path, model.dump(2) + "\n");
    artifact.key = task_hash(task) + "-fp32-model";
    return artifact;
  }
  const std::string& path = task.reference_paths.at(backend);
  compile::CompileJob job;
  job.backend = backend;
  job.source_name = std::filesystem::path(path).filename().string();
  job.source = read_file(path);
  job.defines = task.fp32_model_defines;
  return build(job);
}

void Evaluator::load_fp32_model(const compile::Artifact& model) { oracle_->load_fp32_model(model); }

void Evaluator::provide_inputs() {
  if (worker::provided_tensors(task_.signature).empty()) return;
  // Every seed a candidate request can use, made once now: the gate cases', and on a timed
  // workload the rotated sets' (timing_seed_ + s). A checked call that overwrites a set runs
  // on its workload's timed gate case, whose seed is among the gate cases'.
  std::map<std::string, std::pair<Workload, std::set<uint64_t>>> seeds;
  for (const GateCase& gate_case : gate_cases_) {
    auto& entry = seeds[gate_case.workload.name];
    entry.first = gate_case.workload;
    entry.second.insert(gate_case.seed);
  }
  for (const Workload& workload : task_.workloads) {
    if (!workload.timed) continue;
    auto& entry = seeds[workload.name];
    entry.first = workload;
    for (int s = 0; s < input_sets_for(workload); ++s) {
      entry.second.insert(timing_seed_ + static_cast<uint64_t>(s));
    }
  }
  for (const auto& [name, entry] : seeds) {
    oracle_->provide(entry.first, {entry.second.begin(), entry.second.end()});
  }
}

ProfileInputs Evaluator::profile_inputs() const {
  return {timing_seed_, oracle_->provided_dir(), candidate_task_path_};
}

void Evaluator::drop_non_finite_adversarial(std::vector<std::string>& warnings) {
  std::set<std::string> dropped;
  for (const GateCase& gate_case : gate_cases_) {
    if (!gate_case.adversarial || dropped.contains(gate_case.distribution)) continue;
    const ExpectedOutputs& expected = oracle_->expected(gate_case);
    for (const OutputLayout& output : output_layout(task_.signature, gate_case.workload)) {
      const TensorSpec& spec = task_.signature.tensors[output.tensor];
      const int64_t at =
          first_non_finite(spec.dtype, expected.file.bytes(output.offset, output.bytes));
      if (at < 0) continue;
      dropped.insert(gate_case.distribution);
      warnings.push_back("input distribution '" + gate_case.distribution +
                         "' left out of the gate: the reference's output '" + spec.name +
                         "' is not finite at " + format_index(at, output.shape) + " on " +
                         gate_case.label() + " (the gate adds it to tasks that do not list it)");
      break;
    }
  }
  std::erase_if(gate_cases_, [&dropped](const GateCase& gate_case) {
    return gate_case.adversarial && dropped.contains(gate_case.distribution);
  });
}

std::vector<SelfTestProbe> Evaluator::probes(const GateCase& gate_case) {
  bool any_two_elements = false, any_two_rows = false;
  for (const TensorSpec& spec : task_.signature.tensors) {
    if (spec.role != TensorRole::input) continue;
    const std::vector<int64_t> shape = bind_shape(spec, gate_case.workload);
    any_two_elements = any_two_elements || worker::element_count(shape) >= 2;
    any_two_rows = any_two_rows || (!shape.empty() && shape.front() >= 2);
  }
  std::vector<SelfTestProbe> found;
  for (const auto& [remap, changes_inputs] :
       {std::pair{"every_16th", any_two_elements}, std::pair{"half_rows", any_two_rows}}) {
    if (!changes_inputs) continue;
    GateCase probe_case = gate_case;
    probe_case.remap = remap;
    probe_case.calls = 1;
    probe_case.late_write_check = false;
    const ExpectedOutputs& expected = oracle_->expected(probe_case);
    SelfTestProbe probe{remap, {}};
    for (const OutputLayout& output : output_layout(task_.signature, gate_case.workload)) {
      probe.outputs.push_back(expected.file.bytes(output.offset, output.bytes));
    }
    found.push_back(std::move(probe));
  }
  return found;
}

std::string Evaluator::screen(const std::string& source, const std::string& source_name,
                              const std::string& backend) const {
  const std::vector<PolicyViolation> violations =
      worker::is_python_candidate(source_name)
          ? check_python_source(task_.source_policy, source, python_screen_, backend)
          : check_source(task_.source_policy, source, backend);
  return violations.empty() ? "" : format_violations(violations, source_name);
}

std::string Evaluator::check_signature(const std::string& source,
                                       const std::string& source_name) const {
  if (!worker::is_python_candidate(source_name) || problem_source_.empty()) return "";
  return check_model_new_signature(source, problem_source_);
}

int Evaluator::input_sets_for(const Workload& workload) const {
  // Rotation defeats pointer-keyed caching at small sizes; at gigabytes the checks that write
  // new values at a used address do that job, and a second set would double the memory.
  const auto set_bytes = static_cast<double>(min_bytes_moved(task_.signature, workload));
  return set_bytes <= policy_.rotation_limit_bytes ? policy_.input_sets : 1;
}

CandidateEvaluation Evaluator::evaluate(const compile::Artifact& artifact) {
  return evaluate(artifact, candidates_);
}

CandidateEvaluation Evaluator::evaluate(const compile::Artifact& artifact, worker::Worker& on) {
  CandidateEvaluation result;
  const auto fail = [&result](Verdict verdict, const std::string& message) {
    result.verdict = verdict;
    result.message = message;
    return result;
  };
  if (artifact.verdict != Verdict::ok) {
    return fail(artifact.verdict,
                artifact.verdict == Verdict::compile_error ? "compile error" : artifact.log);
  }
  auto start = Clock::now();
  worker::LoadResult loaded = on.load(load_request(artifact), load_timeout_s(artifact));
  if (worker::is_python_candidate(artifact.path)) {
    result.worker_build_s = seconds_since(start);
    start = Clock::now();
  }
  if (loaded.verdict != Verdict::ok) return fail(loaded.verdict, loaded.message);
  result.handle = loaded.handle;

  const std::vector<GateCase> cases = rung0_cases();
  result.gate = run_gate(on, loaded.handle, *oracle_, task_, cases, *scratch_,
                         policy_.run_timeout_s);
  RungRecord gate{Rung::gate, result.gate.verdict, result.gate.message, seconds_since(start),
                  {{"cases_checked", result.gate.cases_checked},
                   {"cases_planned", cases.size()},
                   {"cases_deferred", gate_cases_.size() - cases.size()},
                   {"max_abs_error", result.gate.max_abs_error},
                   {"max_rel_error", result.gate.max_rel_error},
                   {"max_normalized_error", result.gate.max_normalized_error},
                   {"calls_bitwise_equal", result.gate.calls_bitwise_equal},
                   {"worker_s", result.gate.worker_seconds},
                   {"worker_inputs_s", result.gate.worker_input_seconds},
                   {"worker_outputs_s", result.gate.worker_output_seconds},
                   {"worker_checks_s", result.gate.worker_check_seconds},
                   {"compare_s", result.gate.compare_seconds},
                   {"reference_s", result.gate.reference_seconds}}};
  result.rungs.push_back(gate);
  if (result.gate.verdict != Verdict::ok) return fail(result.gate.verdict, result.gate.message);
  for (const GateOutcome::VerifiedOutput& output : result.gate.verified) {
    checks_->add_verified(output.workload, output.seed, output.distribution, output.digest);
  }

  start = Clock::now();
  result.quick = time_quick_in_window(on, loaded.handle, result.quick_reference);
  nlohmann::json quick_detail = timing_json(result.quick);
  if (result.quick_reference) quick_detail["reference"] = *result.quick_reference;
  result.rungs.push_back({Rung::quick, result.quick.verdict, result.quick.message,
                          seconds_since(start), quick_detail});
  if (result.quick.verdict != Verdict::ok) return fail(result.quick.verdict, result.quick.message);
  result.samples_ms = result.quick.samples_ms;
  result.timing = result.quick.summary;
  return result;
}

std::optional<CompareOutcome> gates_before_comparing(EvaluationPlane& plane, int incumbent,
                                                     int challenger, worker::Worker& on) {
  for (const int handle : {incumbent, challenger}) {
    const EvaluationPlane::FullSizeGate gate = plane.gate_at_full_size(handle, on);
    if (gate.verdict == Verdict::ok) continue;
    CompareOutcome failed;
    failed.failed_handle = handle;
    failed.verdict = gate.verdict;
    failed.message = gate.message;
    return failed;
  }
  return std::nullopt;
}

std::vector<GateCase> Evaluator::gate_cases_of(bool timed) const {
  std::vector<GateCase> cases;
  for (const GateCase& gate_case : gate_cases_) {
    if (gate_case.workload.timed == timed) cases.push_back(gate_case);
  }
  return cases;
}

std::vector<GateCase> Evaluator::rung0_cases() const {
  return policy_.defer_timed_gate ? gate_cases_of(false) : gate_cases_;
}

EvaluationPlane::FullSizeGate Evaluator::gate_at_full_size(int handle, worker::Worker& on) {
  if (!policy_.defer_timed_gate) return {};
  const std::pair<const worker::Worker*, int> key{&on, handle};
  {
    std::lock_guard<std::mutex> lock(full_size_gates_mutex_);
    const auto found = full_size_gates_.find(key);
    if (found != full_size_gates_.end()) {
      FullSizeGate earlier = found->second;
      earlier.ran = false;
      earlier.seconds = 0.0;
      return earlier;
    }
  }
  const std::vector<GateCase> cases = gate_cases_of(true);
  const auto start = Clock::now();
  const GateOutcome gate =
      run_gate(on, handle, *oracle_, task_, cases, *scratch_, policy_.run_timeout_s);
  FullSizeGate outcome;
  outcome.ran = true;
  outcome.cases = static_cast<int>(cases.size());
  outcome.seconds = seconds_since(start);
  outcome.verdict = gate.verdict;
  if (gate.verdict != Verdict::ok) {
    outcome.message = "the gate at full size (deferred from rung 0 to the first rung that "
                      "decides): " + gate.message;
  }
  for (const GateOutcome::VerifiedOutput& output : gate.verified) {
    checks_->add_verified(output.workload, output.seed, output.distribution, output.digest);
  }
  std::lock_guard<std::mutex> lock(full_size_gates_mutex_);
  full_size_gates_[key] = outcome;
  return outcome;
}

worker::LoadResult Evaluator::load(const compile::Artifact& artifact) {
  return load(artifact, candidates_);
}

worker::LoadResult Evaluator::load(const compile::Artifact& artifact, worker::Worker& on) {
  return on.load(load_request(artifact), load_timeout_s(artifact));
}

double Evaluator::load_timeout_s(const compile::Artifact& artifact) const {
  return worker::is_python_candidate(artifact.path) ? policy_.python_load_timeout_s
                                                    : policy_.load_timeout_s;
}

worker::LoadRequest Evaluator::load_request(const compile::Artifact& artifact) const {
  worker::LoadRequest request{artifact.path, ""};
  if (worker::is_python_candidate(artifact.path)) request.task_path = candidate_task_path_;
  return request;
}

}  // namespace kforge::evaluation
