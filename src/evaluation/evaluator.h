// The evaluation plane's ladder, run from the orchestrator through two Worker seams: one worker
// runs only the task's reference (the oracle), the other runs candidates. DESIGN.md "Evaluation
// plane":
//   screen  static source policy (source_policy.h), before anything is compiled;
//   rung 0  gate: every gate workload x seeds x distributions, two calls each, plus the timed
//           workloads once; judged in the orchestrator (gate.h);
//   rung 1  quick timing on the primary timed workload, with the host-clock cross-check, the
//           physical floor and a re-check of one timed call's outputs (measurement.h);
//   rung 2  every timed workload, more repetitions, against the reference's times;
//   rung 3  final: reference and candidate interleaved in rounds (profiling plugs in here).
// A new best is accepted only through compare(): a paired, interleaved comparison whose
// confidence interval clears the minimum gain. Every candidate failure is a verdict; only
// harness failures throw.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/scratch_dir.h"
#include "compile/compiler.h"
#include "core/baseline.h"
#include "core/ladder.h"
#include "evaluation/comparison.h"
#include "evaluation/gate.h"
#include "evaluation/measurement.h"
#include "evaluation/profiler.h"
#include "evaluation/python_policy.h"
#include "evaluation/self_check.h"
#include "evaluation/reference_oracle.h"
#include "evaluation/statistics.h"
#include "evaluation/timed_checks.h"
#include "core/task.h"
#include "worker/crash_retry.h"
#include "worker/worker.h"

namespace kforge::evaluation {

/// Every knob of the plane, with units in the names. Defaults are the ones the benchmarks in
/// bench/evaluation_h200.md were measured with.
struct EvaluationPolicy {
  GatePlan gate;
  double load_timeout_s = 60.0;
  /// Loading a Python candidate imports it, which is its build: load_inline compiles the
  /// extension (g++ or nvcc, 30-90 s on a busy 2-core machine) and Triton may compile at import.
  double python_load_timeout_s = 600.0;
  double run_timeout_s = 300.0;    // one gate case (both calls and read-backs)
  double time_timeout_s = 300.0;   // one timing request
  worker::MeasurementPolicy quick{2, 10, 40, 0.01, 3.0};    // rung 1
  /// Rung 1 interleaves (issue 21): the candidate's quick timing is split into `quick_rounds`
  /// rounds (quick_round_measurement) between quick_rounds + 1 rounds of the reference in its
  /// worker (R C R C R C R), and the candidate's quick speedup is over all the reference's
  /// samples pooled, so both sampled the same load. A reference timed once at the start of a
  /// run made the reference itself, run as a candidate, 2.17x "faster" than itself on a loaded
  /// 2-core machine; one round before and one after (R C R) still called identical code faster
  /// in one window and slower in another when the load changed within the window
  /// (bench/ladder/identical_cpu_rung2_interleaved.md, run 1). Rung 2 interleaves the same way
  /// (full_rounds). Both sides' rounds have the same shape, 2 warm-up calls and 4 timed calls
  /// (quick_round_measurement), so that an effect of the switch between workers weighs on both
  /// alike: on the loaded 2-core VM the first timed call after one warm-up was 2.5x slower in
  /// every reference round of a window (6.8 against 2.7 ms), a third of rounds of 3 calls and
  /// less of the candidate's longer rounds, and identical code read 1.78x
  /// (bench/ladder/identical_cpu_rung1_interleaved.md). Cost per candidate: 4 x (2 + 4) = 24
  /// reference calls in four requests, each call with its cache flush: microseconds on cuda;
  /// on the 2-core cpu VM, whose every call also writes a 256 MiB flush buffer (0.1-0.25 s
  /// under load), a round stops at 1 s.
  int quick_rounds = 3;
  worker::MeasurementPolicy quick_reference{2, 4, 4, 1.0, 1.0};
  worker::MeasurementPolicy full{3, 20, 200, 0.005, 10.0};  // rung 2, per workload
  /// Rung 2 times a workload in this many candidate rounds, each under `full` with its
  /// repetitions and seconds divided among them, between reference rounds (FullRung::Entry).
  int full_rounds = 3;
  worker::MeasurementPolicy round{2, 10, 10, 1.0, 10.0};    // one round of rung 3 / compare()
  int final_rounds = 5;            // rung 3 rounds
  int compare_rounds = 5;          // rounds of an acceptance comparison
  /// Rotated input sets while timing (workloads below rotation_limit_bytes): a kernel that
  /// memoizes by input address or a sample of the values must hold this many to replay them.
  int input_sets = 4;
  double rotation_limit_bytes = double(int64_t{1} << 30);  // above: one set (see time_request)
  bool flush_l2 = true;
  /// Check timed outputs: every timing request of a candidate (quick, full, acceptance rounds,
  /// final rounds) re-checks calls chosen from a secret of the run (Evaluator::plan_checks).
  bool recheck_timed_outputs = true;
  int checks_per_request = 2;      // checked calls of a quick or full timing request
  int checks_per_round = 1;        // checked calls of one round of compare() / time_paired()
  TimingChecks checks;
  double acceptance_level = 0.95;  // confidence of the acceptance interval
  double min_gain = 0.01;          // a new best must be faster by more than this, with confidence
  /// compile: torch.compile of the reference module is compiled and quick-timed at prepare(),
  /// and timed in every round of rung 3 (time_paired) besides the reference and the best. Only
  /// for a PyTorch reference; prepare() falls back to eager, with a warning, when the module
  /// fails to compile.
  BaselineKind baseline = BaselineKind::eager;
  /// A timing request that may compile (baseline compile): tracing, code generation and
  /// autotuning of a large module take minutes, far past time_timeout_s.
  double compile_timeout_s = 1800.0;
  /// The ladder's check at full size, deferred (issue 21). Off (kforge eval, --fidelity full):
  /// rung 0 runs every gate case, the timed workloads' included, and rung 1's timing has
  /// checked calls. On (kforge optimize under the ladder): rung 0 runs the cases of the gate
  /// (untimed) workloads only, rung 1 times without checked calls, and the timed workloads'
  /// cases run once per loaded candidate when it first reaches a rung whose numbers decide
  /// something: an acceptance comparison, rung 2 or rung 3 (gate_at_full_size). At KernelBench
  /// sizes those cases are most of a candidate's cost (a 6.4 GB output made, read back and
  /// compared: the gate took 3.26 s a gelu point on the H200 against rung 1's 0.31 s,
  /// bench/search/spaces/cuda/gelu.json), and successive halving stops most candidates at
  /// rung 1. An unchecked rung-1 time decides a promotion and nothing else: a kernel that skips
  /// work at full size wins a place at rung 2 and fails there before any timing. KernelBrain's
  /// ladder orders its checks the same way, cheap ones first and full-size ones for the
  /// promising.
  bool defer_timed_gate = false;
};

/// One of rung 2's candidate rounds on a workload: `policy.full` with its repetitions (at
/// least 5 a round) and seconds divided among `policy.full_rounds` rounds (FullRung::Entry).
worker::MeasurementPolicy full_round_measurement(const EvaluationPolicy& policy);
/// One of rung 1's candidate rounds: `policy.quick`'s least repetitions divided among
/// `policy.quick_rounds` rounds, rounded up (at least 4 a round), as a fixed count (no noise
/// rule: every round the same length, as the reference's are), its seconds divided among them,
/// and quick_reference's warm-up (the same shape as the reference's rounds).
worker::MeasurementPolicy quick_round_measurement(const EvaluationPolicy& policy);

/// What one rung did to one candidate, for the run directory.
struct RungRecord {
  Rung rung = Rung::gate;          // gate or quick (evaluate() runs rungs 0 and 1)
  Verdict verdict = Verdict::ok;
  std::string message;
  double seconds = 0.0;            // wall time of the rung
  nlohmann::json detail;           // rung-specific numbers (errors, samples, costs)
};
void to_json(nlohmann::json& j, const RungRecord& record);

/// Every round's samples together, rounds in order (a rung's rounds pooled: rung 1's and rung
/// 2's reference rounds, rung 3's paired rounds).
std::vector<double> pooled_rounds(const std::vector<std::vector<double>>& rounds);

/// Rung 1's reference, timed in the candidate's own window (EvaluationPolicy::quick_reference):
/// quick_rounds + 1 rounds in the reference's worker, on the same workload and inputs, one
/// before each of the candidate's quick rounds and one after the last. Interleaving cancels a
/// load that changes within the window as long as it changes slowly against a round; bracketing
/// alone (A B A) cancels only a steady or linear one. robust-kbench orders its timings the same
/// way.
struct QuickReference {
  /// The reference's samples per round, in order, in ms. Runs recorded before rung 1
  /// interleaved hold two rounds (before and after).
  std::vector<std::vector<double>> rounds_ms;
  int candidate_rounds = 0;       // the candidate's quick rounds between them
  /// Every round's samples together, in order (pooled_rounds).
  std::vector<double> samples_ms() const { return pooled_rounds(rounds_ms); }
  double median_ms = 0.0;         // median of every round's samples together
  /// The candidate's rung-1 speedup: median_ms over its quick median, with a percentile-
  /// bootstrap interval at acceptance_level (estimate_speedup: both sample sets resampled).
  SpeedupEstimate speedup;
  /// judge_speedup at min_gain: a tie when the interval reaches past 1 +- min_gain either way.
  /// Recorded, not decided on: the interval counts the samples' noise only, and two worker
  /// processes over one short window differ for identical code by up to 7% on the loaded cpu
  /// VM (bench/ladder/README.md). The scheduler scores the samples' order-statistic bounds.
  ComparisonOutcome outcome = ComparisonOutcome::tie;
  double seconds = 0.0;           // wall time of the reference's rounds (part of the rung's seconds)
};
void to_json(nlohmann::json& j, const QuickReference& window);
/// Reads what to_json wrote, or the form of runs recorded before rung 1 interleaved
/// (before_ms and after_ms: two rounds around one candidate round); throws nlohmann's exception
/// for a missing or mistyped field.
void from_json(const nlohmann::json& j, QuickReference& window);

/// Everything learned about one candidate.
struct CandidateEvaluation {
  Verdict verdict = Verdict::ok;
  std::string message;             // why it failed, or empty
  int handle = -1;                 // candidate-worker handle when loaded
  GateOutcome gate;
  TimingVerdict quick;
  std::vector<double> samples_ms;  // quick-rung samples kept
  SampleSummary timing;            // their summary
  /// The reference timed around the quick timing; empty when rung 1 did not pass, or from a
  /// plane that times none (a test's fake, a replay of older records).
  std::optional<QuickReference> quick_reference;
  std::vector<RungRecord> rungs;
  /// Seconds a Python candidate's worker spent importing it (its build: torch's load_inline
  /// runs the compiler there, Triton compiles at first call), wall time. It is compile time,
  /// reported apart and left out of the gate rung's seconds (issue 19); 0 for a native
  /// candidate, whose load (dlopen) stays in the gate rung.
  double worker_build_s = 0.0;
};

/// Baseline compile at prepare(): torch.compile of the reference module compiled (its compile
/// time) and quick-timed once on the primary timed workload.
struct CompileProbe {
  bool ran = false;         // the policy asked for it (and the reference is a PyTorch module)
  bool ok = false;          // compiled and timed; else `message` says why (the run goes on
                            // against eager alone)
  std::string message;      // "<verdict>: <the worker's message, naming the problem and why>"
  double compile_ms = 0.0;  // torch.compile plus the first call, wall time (TimeResult)
  double median_ms = 0.0;   // the compiled module's quick-rung median
};

/// What preparing the task found.
struct TaskReport {
  SelfTestReport self_test;
  std::vector<std::string> warnings;  // weak-task findings and other notes for the user
  PhysicalFloor floor;                // of the primary timed workload
  worker::DeviceInfo device;
  double seconds = 0.0;
  /// Where `seconds` went, in order, seconds each: "workers" (both workers' start),
  /// "reference_load", "provided_inputs", "gate_outputs" (the reference's outputs of the gate
  /// cases, made on first use), "self_test", "timed_outputs" (the timed workload's check
  /// outputs), "compile_baseline".
  std::vector<std::pair<std::string, double>> phases;
  CompileProbe compile;               // baseline compile only
};

/// A comparison of two candidates; `paired` is empty when either failed to time, and then
/// `failed_handle`, `verdict` and `message` say which and why (a check that found a wrong output
/// is wrong_answer: the candidate must be rejected, whichever rung saw it).
struct CompareOutcome {
  std::optional<PairedComparison> paired;
  int failed_handle = -1;
  Verdict verdict = Verdict::ok;
  std::string message;
};

/// Rung 2's result: per timed workload, candidate and reference medians.
struct FullRung {
  struct Entry {
    std::string workload;
    /// The candidate's checked timings of this workload, pooled: its samples are every
    /// round's (EvaluationPolicy::full_rounds), its summary theirs.
    TimingVerdict candidate;
    /// The reference's median on this workload, over rounds interleaved with the candidate's
    /// (reference, candidate, reference, ..., reference: EvaluationPolicy::quick_reference
    /// rounds around full_rounds candidate rounds), so that a load that comes and goes during
    /// the run, or during this candidate's timing, weighs on both alike (issue 21: identical code
    /// under load read 0.57-9.99x against a reference timed once per run, and 0.21-1.28x with
    /// one reference round before and one after a single long candidate timing). A plane that
    /// times no rounds (a test's fake, a replay) gives the reference median it has.
    double reference_median_ms = 0.0;
    double speedup = 0.0;
    std::vector<std::vector<double>> reference_rounds_ms;  // in timing order; empty if none
  };
  Verdict verdict = Verdict::ok;
  std::string message;
  /// The failure is the gate's at full size (EvaluationPlane::gate_at_full_size), run first:
  /// the candidate's verdict whatever it is (a crash there is a crash at rung 0).
  bool gate_failed = false;
  std::vector<Entry> workloads;
  double geomean_speedup = 0.0;
};

/// The evaluation plane as the search uses it: the seam the Optimizer measures through. Rungs
/// 0-3 and the acceptance comparison of candidates on a given candidate worker `on`, against
/// the task's reference. Evaluator (below) is the real one; a test or a simulation runner passes
/// a fake (one that replays recorded results need never touch `on`). Its policy() is the run's
/// one EvaluationPolicy: the search reads min_gain, acceptance_level and final_rounds there.
/// Whether the gate's fp32 precision rule (precision.h) applies to `task` on `backend`: its
/// precision is "fp32" and it has an fp32 model, i.e. a native task with [fp32_model] defines
/// and a reference for `backend`, or a PyTorch task whose derivation asked for one
/// (torch.fp32_model: the module has work tensor cores could do, and runs in float64).
bool fp32_rule_applies(const Task& task, const std::string& backend);

/// The task's fp32 model for EvaluationPlane::load_fp32_model, or nullopt where the rule does not
/// apply. Native: the reference built by `build` with Task::fp32_model_defines. PyTorch: a copy
/// of the derived task that runs forward in the module's own dtype with TF32 off
/// (torch.double_reference false, torch.fp32_model_run true), written into folder `dir`.
std::optional<compile::Artifact> fp32_model_artifact(
    const Task& task, const std::string& backend,
    const std::function<compile::Artifact(const compile::CompileJob&)>& build,
    const std::string& dir);

class EvaluationPlane {
 public:
  virtual ~EvaluationPlane() = default;

  /// Rung 3's rounds: each times the reference, then the candidate on the same inputs, so that
  /// drift affects both alike. `failure` is set ("<verdict>: <why>") if the candidate fails.
  /// With baseline compile, each round also times torch.compile of the reference module
  /// (`compile_rounds`, one per round); a compiled module that fails in a round leaves
  /// `compile_rounds` empty and `compile_failure` saying why, and the rounds go on without it.
  struct PairedSamples {
    std::vector<std::vector<double>> reference_rounds;
    std::vector<std::vector<double>> candidate_rounds;
    std::vector<std::vector<double>> compile_rounds;
    std::string failure;
    std::string compile_failure;
    std::vector<double> reference_ms() const;
    std::vector<double> candidate_ms() const;
  };

  /// Loads the reference, checks the task and runs its self-test (Evaluator::prepare). Throws
  /// Error with the reason when the task is broken: the run must not start.
  virtual TaskReport prepare(const compile::Artifact& reference) = 0;
  /// Loads the task's fp32 model (fp32_model_artifact) for the gate's precision rule (precision.h),
  /// after prepare(). Throws Error when it does not compile or load. Planes that replay recorded
  /// verdicts have no use for it.
  virtual void load_fp32_model(const compile::Artifact& model) { (void)model; }
  /// Static policy check of a candidate's source: "" when it passes, else the violations.
  virtual std::string screen(const std::string& source, const std::string& source_name,
                             const std::string& backend) const = 0;
  /// A Python candidate's shape before it is built (model_new_check.h): "" when it passes or is
  /// not a Python candidate, else why it cannot stand in for Model (verdict wrong_signature).
  virtual std::string check_signature(const std::string& source,
                                      const std::string& source_name) const {
    (void)source;
    (void)source_name;
    return "";
  }
  /// Rungs 0 and 1 of one compiled candidate, loaded into `on`; rung 1 with the reference timed
  /// in the same window (CandidateEvaluation::quick_reference) where the plane can.
  virtual CandidateEvaluation evaluate(const compile::Artifact& artifact, worker::Worker& on) = 0;
  /// Loads a compiled candidate into `on` without gating or timing it; a verdict other than ok
  /// says why it could not.
  virtual worker::LoadResult load(const compile::Artifact& artifact, worker::Worker& on) = 0;
  /// The reference's rung-1 timing at the start of a run (its floor check, the prompts' first
  /// number; a candidate's quick speedup is over its own window's reference). Throws Error if
  /// it fails.
  virtual TimingVerdict time_reference() = 0;
  /// What gate_at_full_size() did: `ran` false when there was nothing to run (the policy does
  /// not defer, or the cases ran for this handle already: `verdict` is then theirs).
  struct FullSizeGate {
    Verdict verdict = Verdict::ok;
    std::string message;  // the failure, naming the case, call and output
    bool ran = false;
    int cases = 0;        // cases run
    double seconds = 0.0; // wall time of the cases
  };
  /// The gate's cases of the timed workloads (plan_gate) for candidate `handle` loaded in `on`,
  /// when the policy defers them (EvaluationPolicy::defer_timed_gate), once per handle; nothing
  /// otherwise. full_rung(), compare(), compare_on() and time_paired() run it first themselves
  /// (a failure there is their failure, with this verdict); the search calls it before a
  /// candidate becomes the best without a comparison (the first correct one). The default, for
  /// a plane that gates everything at rung 0, does nothing.
  virtual FullSizeGate gate_at_full_size(int handle, worker::Worker& on) {
    (void)handle;
    (void)on;
    return {};
  }
  /// Rung 2 of a candidate loaded in `on`: every timed workload against the reference's times.
  virtual FullRung full_rung(int handle, worker::Worker& on) = 0;
  /// Makes the reference's expected outputs of every timed workload ready (rung 2's checked
  /// calls compare with them), so that concurrent full_rung() calls on different workers only
  /// read them. Throws Error if the reference fails.
  virtual void prime_full_rung_reference() = 0;
  /// Rung 3 of a candidate loaded in `on`: final_rounds paired rounds with the reference.
  virtual PairedSamples time_paired(int candidate_handle, worker::Worker& on) = 0;
  /// Acceptance: `incumbent` and `challenger`, both loaded in `on`, timed interleaved and judged
  /// at acceptance_level and min_gain; without `paired` when either fails.
  virtual CompareOutcome compare(int incumbent, int challenger, worker::Worker& on) = 0;
  /// compare() on the timed workload named `workload` instead of the primary one: rung 2's
  /// challenge of the best (Optimizer::confirm_full_rung), one such comparison per timed
  /// workload. Throws Error when `workload` is not a timed workload of the task.
  virtual CompareOutcome compare_on(const std::string& workload, int incumbent, int challenger,
                                    worker::Worker& on) = 0;
  /// The primary timed workload (rung 1's, rung 3's and the profile's).
  virtual const Workload& timed_workload() const = 0;
  /// The policy this plane measures with: the run's only copy.
  virtual const EvaluationPolicy& policy() const = 0;
  /// The seed and provided inputs a profiled call of the timed workload runs on, and the
  /// derived task a Python candidate is loaded with.
  virtual ProfileInputs profile_inputs() const { return {}; }
};

/// gate_at_full_size() of both sides of a comparison on `plane`, incumbent first: the first
/// failure as the comparison's outcome (failed_handle, verdict, message), or nullopt when both
/// pass (or the plane defers nothing). Every plane's compare() and compare_on() begin with it.
std::optional<CompareOutcome> gates_before_comparing(EvaluationPlane& plane, int incumbent,
                                                     int challenger, worker::Worker& on);

class Evaluator : public EvaluationPlane {
 public:
  /// `candidates` runs candidates; `reference` runs only the reference (a different process).
  Evaluator(worker::Worker& candidates, worker::Worker& reference, const Task& task,
            EvaluationPolicy policy);
  ~Evaluator() override;

  /// Loads the reference in its worker, checks that every workload fits the device, computes
  /// the expected outputs of every gate case (the reference must write every output, leave its
  /// inputs alone and agree with itself) and runs the task self-test. Throws Error with the
  /// reason when the task is broken: the run must not start. Weak-task findings are warnings.
  TaskReport prepare(const compile::Artifact& reference) override;
  void load_fp32_model(const compile::Artifact& model) override;

  /// Static policy check of a candidate's source: "" when it passes, else the violations. A
  /// Python candidate (`source_name` ending in ".py") gets the Python screen (python_policy.h),
  /// with the task family's torch ops forbidden.
  std::string screen(const std::string& source, const std::string& source_name,
                     const std::string& backend) const override;
  /// For a `.py` candidate: ModelNew exists and its constructor takes Model.__init__'s
  /// parameters (check_model_new_signature against the problem file); "" otherwise.
  std::string check_signature(const std::string& source,
                              const std::string& source_name) const override;

  /// Rung 0 and rung 1 of one compiled candidate, loaded into `on` (default: the candidate
  /// worker given to the constructor); rung 1 is the candidate's quick timing in rounds
  /// between the reference's (time_quick_in_window). Every method that takes a worker may run concurrently
  /// with the others on *different* workers once prepare() and prime_full_rung_reference()
  /// have run (they fill the caches the calls read); one worker serves one call at a time.
  CandidateEvaluation evaluate(const compile::Artifact& artifact);
  CandidateEvaluation evaluate(const compile::Artifact& artifact, worker::Worker& on) override;

  /// Loads a compiled candidate into `on` (default: the candidate worker) without gating or
  /// timing it: a resumed run re-obtains the handle of a candidate whose verdict it restored,
  /// and a worker pool loads a candidate on the worker that compares it. A verdict other than
  /// ok (wrong_signature, worker_crashed, timeout) says why it could not.
  worker::LoadResult load(const compile::Artifact& artifact);
  worker::LoadResult load(const compile::Artifact& artifact, worker::Worker& on) override;

  /// The reference's rung-1 timing (in the reference worker). Throws Error if it fails.
  TimingVerdict time_reference() override;

  /// The timed workloads' gate cases of `handle` in `on` under defer_timed_gate (the plane's
  /// doc); their digests join the verified ones, as rung 0's do. Thread-safe across workers.
  FullSizeGate gate_at_full_size(int handle, worker::Worker& on) override;

  /// Rung 2 for a loaded candidate: every timed workload with the full policy, against the
  /// reference's times on the same workloads (cached).
  FullRung full_rung(int handle);
  FullRung full_rung(int handle, worker::Worker& on) override;
  /// Times the reference on every timed workload with the full policy (in the reference worker)
  /// unless already done: full_rung() needs these, and concurrent full rungs must find them
  /// ready. Throws Error if the reference fails.
  void prime_full_rung_reference() override;

  /// Rung 3: `final_rounds` rounds, each timing the reference (its worker) then the candidate
  /// on the same inputs, so drift affects both alike. `failure` is set if the candidate fails.
  /// With baseline compile, torch.compile of the reference takes a turn in each round too, the
  /// first of a round rotating over the three (an order effect favours none).
  PairedSamples time_paired(int candidate_handle);
  PairedSamples time_paired(int candidate_handle, worker::Worker& on) override;

  /// Acceptance: candidates `incumbent` and `challenger` (both loaded in the candidate worker)
  /// timed interleaved for `compare_rounds` rounds, each round with checked calls; judged by
  /// judge_paired at acceptance_level and min_gain. Without `paired` when either fails.
  CompareOutcome compare(int incumbent, int challenger);
  CompareOutcome compare(int incumbent, int challenger, worker::Worker& on) override;
  /// compare() on timed workload `workload` (its checked calls named "rung-2 challenge").
  CompareOutcome compare_on(const std::string& workload, int incumbent, int challenger,
                            worker::Worker& on) override;

  const Workload& timed_workload() const override { return timed_workload_; }
  ProfileInputs profile_inputs() const override;
  const EvaluationPolicy& policy() const override { return policy_; }
  const worker::DeviceInfo& device() const { return device_; }

 private:
  worker::TimeRequest time_request(int handle, const Workload& workload,
                                   const worker::MeasurementPolicy& measurement,
                                   uint64_t seed) const;
  // evaluator_baseline.cpp: the torch.compile baseline
  /// Baseline compile at prepare(): compiles and quick-times the reference module compiled; a
  /// module that fails to compile turns the policy's baseline back to eager with a warning in
  /// `warnings`. Throws Error when this PyTorch cannot compile at all (the CLI refuses that up
  /// front; this is the backstop).
  CompileProbe prepare_compile_baseline(std::vector<std::string>& warnings);
  /// The reference timed on the timed workload under `measurement`. Throws Error when it
  /// fails: the reference is trusted, so its failure stops the run. Serialized on
  /// reference_timing_: concurrent rung-1 windows (a worker pool) share the reference's worker.
  worker::TimeResult time_reference_samples(const worker::MeasurementPolicy& measurement);
  /// The same on `workload` (a timed one; its expected outputs primed).
  worker::TimeResult time_reference_samples(const Workload& workload,
                                            const worker::MeasurementPolicy& measurement);
  /// One rung-3 turn of the compiled reference module: its samples, or nullopt with `failure`
  /// set ("<verdict>: <why>").
  std::optional<std::vector<double>> time_compiled_reference(std::string& failure);
  /// Rung 1 of `handle` on `on`: the candidate's checked quick timing in quick_rounds rounds
  /// interleaved with the reference's (EvaluationPolicy::quick_reference), `window` set to the
  /// reference's rounds when every candidate round passed. Throws Error when the reference
  /// fails (as time_reference_samples).
  TimingVerdict time_quick_in_window(worker::Worker& on, int handle,
                                     std::optional<QuickReference>& window);
  /// A candidate's timing in rounds interleaved with the reference's on `workload`: a
  /// reference round (quick_reference) before each of the candidate's rounds (`per_round`, with
  /// checks[r] checked calls in round r; rounds = checks.size()) and one after the last.
  /// `candidate` pools every round's samples (summary over them all; throttled counts summed;
  /// the first warning kept); on the first round that fails, its verdict, and no more rounds.
  /// Throws Error when the reference fails.
  struct Interleaved {
    std::vector<std::vector<double>> reference_rounds_ms;
    TimingVerdict candidate;
    double reference_seconds = 0.0;  // wall time of the reference's rounds
  };
  Interleaved time_interleaved(worker::Worker& on, int handle, const Workload& workload,
                               const worker::MeasurementPolicy& per_round,
                               const std::vector<int>& checks, Rung rung);
  /// Times `handle` in the candidate worker with `checks` checked calls and judges the timing
  /// (rung `rung`: quick or full); a wrong checked output becomes wrong_answer.
  TimingVerdict time_checked(worker::Worker& on, int handle, const Workload& workload,
                             const worker::MeasurementPolicy& measurement, uint64_t seed,
                             int checks, Rung rung);
  /// A candidate's timing request with `checks` checked calls, sent to `on`; the checked outputs
  /// are compared with the reference's, the guard bands and the work audit read. `timing_name`
  /// names the timing in failures: a rung's name, or "acceptance" for compare()'s rounds.
  /// `verdict` is ok, or wrong_answer (a wrong output, a write outside a tensor) or
  /// rejected_by_policy (work outside args->stream) with `failure` saying why; the raw result
  /// either way.
  struct CheckedTiming {
    worker::TimeResult result;
    Verdict verdict = Verdict::ok;
    std::string failure;
  };
  CheckedTiming time_with_checks(
      worker::Worker& on, int handle, const Workload& workload,
      const worker::MeasurementPolicy& measurement, uint64_t seed, int checks,
      const std::string& timing_name);
  /// compare()'s rounds on `workload`, its checked calls' failures naming `timing_name`.
  CompareOutcome compare_rounds(const Workload& workload, int incumbent, int challenger,
                                worker::Worker& on, const std::string& timing_name);
  /// Input sets a timing request of `workload` asks for (rotation below rotation_limit_bytes).
  int input_sets_for(const Workload& workload) const;
  /// Computes (in the reference worker) the expected outputs of every input a check of
  /// `workload` may run on, so that concurrent checks only read the oracle's cache.
  void prime_check_outputs(const Workload& workload);
  const GateCase& timed_case(const std::string& workload_name) const;
  /// Removes from gate_cases_ every case of an adversarial distribution (GatePlan) on which the
  /// reference's outputs are not finite somewhere, with one warning per distribution.
  void drop_non_finite_adversarial(std::vector<std::string>& warnings);
  /// Has the reference write the provided inputs of every seed candidates will run on.
  void provide_inputs();
  /// The self-test probes (SelfTestProbe) of compact gate case `gate_case`: the reference on its
  /// inputs remapped every_16th and half_rows, each left out where it would change no input.
  std::vector<SelfTestProbe> probes(const GateCase& gate_case);

  worker::Worker& candidates_;
  // The reference's worker, a crash of whose process is retried once (worker/crash_retry.h):
  // killing it in the middle of a timing used to end the whole run.
  worker::CrashRetry reference_worker_;
  std::mutex reference_timing_;  // one timing request at a time in the reference's worker
  const Task& task_;
  EvaluationPolicy policy_;
  Workload timed_workload_;
  std::unique_ptr<ScratchDir> scratch_;
  std::unique_ptr<ReferenceOracle> oracle_;
  std::vector<GateCase> gate_cases_;
  worker::DeviceInfo device_;
  bool full_rung_primed_ = false;  // prime_full_rung_reference() has run
  /// gate_at_full_size()'s outcome per (worker, handle) that ran it (handles are never reused
  /// by a worker client).
  std::map<std::pair<const worker::Worker*, int>, FullSizeGate> full_size_gates_;
  std::mutex full_size_gates_mutex_;
  /// The gate cases of the timed workloads (`timed`) or of the gate workloads.
  std::vector<GateCase> gate_cases_of(bool timed) const;
  /// The gate cases rung 0 runs: every case, or the untimed workloads' under defer_timed_gate.
  std::vector<GateCase> rung0_cases() const;
  uint64_t timing_seed_ = 0;
  std::unique_ptr<TimedChecks> checks_;
  PythonScreen python_screen_;       // what the Python screen knows of the task
  std::string problem_source_;       // the PyTorch problem file's text ("" without one)
  /// The derived task JSON a Python candidate is loaded against (the reference's artifact of a
  /// PyTorch task, set by prepare()); "" for a task with native references only.
  std::string candidate_task_path_;
  /// The load request of `artifact`: with the derived task when it is a Python candidate.
  worker::LoadRequest load_request(const compile::Artifact& artifact) const;
  /// The load request's time limit: python_load_timeout_s for a Python candidate.
  double load_timeout_s(const compile::Artifact& artifact) const;
};

}  // namespace kforge::evaluation
