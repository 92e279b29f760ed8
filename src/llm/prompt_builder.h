// The prompt builder (KernelBrain's prompt builder over HTAM's state summary s_t): turns the
// task, the kernel to improve, the last feedback, the chosen direction and strategy with their
// memory, and a diagnosis into the values of the templates in prompts/ (prompt_template.h).
// Pure functions of their inputs, so the rendered prompts are golden-tested.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/kernel_language.h"
#include "core/verdict.h"
#include "llm/chat.h"
#include "llm/prompt_template.h"
#include "memory/htg.h"
#include "core/task.h"

namespace kforge::llm {

/// A kernel and what is known of its speed on the task's timed workload.
struct KernelState {
  std::string id;
  std::string source;               // standalone source (defines written in)
  std::optional<double> median_ms;  // quick-rung median; nullopt when not timed
  double reference_ms = 0.0;        // the reference's median on the same workload (0: unknown)
  int64_t bytes_moved = 0;          // minimum bytes one call moves (task.h bytes_per_call)
  std::optional<double> flops;      // FLOPs per call when the task gives a formula
};

/// The outcome of one evaluated candidate, for the "last feedback" and repair prompts.
struct FeedbackContext {
  std::string candidate_id;
  Verdict verdict = Verdict::ok;
  std::string message;  // evaluator's reason (wrong answer: max error and where)
  std::string build_log;
  std::optional<double> median_ms;
  double reference_ms = 0.0;
};

/// The chosen direction and strategy with their memory.
struct StrategyContext {
  memory::Direction direction;
  memory::Strategy strategy;
  std::vector<std::string> prefix;   // directions chosen so far, oldest first
  std::optional<memory::Edge> edge;  // previous direction -> this one, when the graph has it
};

/// The compiler's errors, summarized: each `error` line with the two lines after it, at most
/// `max_errors` of them, paths shortened to file names; the log's tail when it has no `error`.
std::string summarize_compile_errors(const std::string& log, int max_errors = 8);
/// One paragraph on a candidate's outcome: verdict, compile errors, wrong-answer details,
/// timing versus the reference.
std::string describe_feedback(const FeedbackContext& feedback);
/// "median 1.234 ms, 2.10x the reference (0.5 ms), 87.0 GB/s moved" or "not timed yet".
std::string describe_numbers(const KernelState& kernel);
/// Roofline-style diagnosis from the numbers (no profiler counters on this path yet): achieved
/// bandwidth and arithmetic intensity, and whether the kernel looks memory- or compute-bound.
std::string diagnose(const KernelState& kernel);
/// The signature, workloads and tolerance as Markdown lists.
std::string describe_signature(const Task& task);
std::string describe_workloads(const Task& task);
std::string describe_tolerance(const Task& task);
/// A direction's memory (goal, triggers, risks, statistics, the prefix and the edge into it)
/// and a strategy's (edit pattern, validation, statistics as positive/negative evidence).
std::string describe_direction(const StrategyContext& context);
std::string describe_strategy(const memory::Strategy& strategy);

class PromptBuilder {
 public:
  /// `abi_header` is include/kforge/kernel.h's text; `reference_source` the text of what
  /// defines the right answer: the task's native reference for `backend`, or for a task with a
  /// torch reference the PyTorch problem file (shown in a ```python fence with the mapping of
  /// the signature onto the module, torch_prompt.h). Keeps a reference to `library`.
  /// `language` cuda or triton (a task with a torch reference) asks for ModelNew modules
  /// instead of native kernels: the system, task and first messages come from
  /// prompts/model_new_*.md (model_new_prompt.h), and every reply is a ```python block.
  PromptBuilder(const PromptLibrary& library, const Task& task, std::string backend,
                std::string abi_header, std::string reference_source,
                KernelLanguage language = KernelLanguage::native);

  /// System message + user message asking for the task's first kernel, written from the
  /// reference (prompts/first.md): for a task with no native reference to start from.
  std::vector<ChatMessage> first() const;
  /// System message + user message asking to apply `context.strategy` to `parent`.
  std::vector<ChatMessage> generate(const KernelState& parent, const StrategyContext& context,
                                    const std::optional<FeedbackContext>& last_feedback,
                                    const std::string& diagnosis) const;
  /// The follow-up user message after `failure` (appended to the generate conversation).
  ChatMessage repair(const FeedbackContext& failure) const;
  /// The selector's single user message.
  std::vector<ChatMessage> select(const std::string& state, const StrategyContext& context,
                                  std::span<const memory::Strategy> candidates) const;

  const std::string& backend() const { return backend_; }
  KernelLanguage language() const { return language_; }

 private:
  PromptValues common() const;
  /// The run asks for ModelNew modules (a ModelNew language on a task with a torch reference).
  bool model_new() const;
  /// "model_new_system" or "system".
  std::string system_template() const;
  /// common() plus `task_sections` (prompts/task.md rendered), for kernel-writing requests.
  PromptValues with_task_sections() const;

  const PromptLibrary& library_;
  const Task& task_;
  std::string backend_;
  std::string abi_header_;
  std::string reference_source_;
  KernelLanguage language_;
};

}  // namespace kforge::llm
