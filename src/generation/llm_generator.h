// The `llm` generator: any OpenAI-compatible model writes and repairs kernels under HTAM's
// guidance (DESIGN.md, "Generation plane"; issue 7).
//
//   initial_proposals  the task's native reference, as the first correct kernel to improve;
//                      without one (a PyTorch problem), "llm-first": a kernel the model
//                      writes from the reference in write_sources (prompts/first.md, no
//                      direction or strategy), repaired like any other
//   apply              plans a proposal "llm-<strategy>-<hash of parent>" without a source
//                      (cheap: the policy asks it once per strategy to filter them)
//   write_sources      renders one prompt per planned proposal (prompt_builder.h), asks the
//                      model concurrently (the client bounds concurrency), extracts and repairs
//                      the kernel deterministically (reply_parser.h); failures are values
//   observe            keeps each candidate's numbers and the last feedback for the prompts
//   repair             continues the proposal's conversation with the failure (compile errors
//                      summarized, wrong-answer details) and asks for a fixed kernel
//
// With a ModelNew language (options.language cuda or triton) every source is a Python module
// (model_new_reply.h extracts and repairs it); a reply without ModelNew, or without any Python
// block, still becomes a candidate, so that the static check's wrong_signature verdict and its
// message reach the model through the repair turn like any other failure.
//   exhausted          the caller's stop reason (budget spent, Ctrl-C)
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "generation/generator.h"
#include "llm/chat.h"
#include "llm/llm_selector.h"
#include "llm/prompt_builder.h"
#include "llm/reply_parser.h"
#include "memory/store.h"
#include "core/kernel_language.h"
#include "core/task.h"

namespace kforge::generation {

struct LlmGeneratorOptions {
  std::string backend;  // "cpu" | "cuda"
  std::string model;
  std::optional<double> temperature;
  std::optional<int> max_tokens;
  /// native: kforge_run kernels; cuda / triton (a PyTorch problem): KernelBench-format ModelNew
  /// modules (`<id>.py` sources, run by the Python candidate worker), the first one written
  /// from the module even when the task has a native reference.
  KernelLanguage language = KernelLanguage::native;
};

class LlmGenerator final : public Generator {
 public:
  /// The id of the first kernel the model writes for a task without a native reference.
  static constexpr const char* kFirstKernelId = "llm-first";

  /// Keeps references to every argument but `options`, `stop_reason` and `log`. `stop_reason`
  /// returns "" while the model may still be asked, else why not (budget, interrupt).
  LlmGenerator(llm::ChatClient& client, const llm::PromptBuilder& prompts, memory::Store& store,
               const Task& task, LlmGeneratorOptions options,
               std::function<std::string()> stop_reason, llm::LlmLogSink log);

  std::string name() const override { return "llm"; }
  std::vector<Proposal> initial_proposals() override;
  std::optional<Proposal> apply(const Proposal& parent, const memory::Strategy& strategy) override;
  std::string standalone_source(const Proposal& proposal) const override;
  void write_sources(const std::vector<Proposal*>& proposals) override;
  void observe(const Proposal& proposal, const Feedback& feedback) override;
  std::optional<Proposal> repair(const Proposal& failed, const Feedback& feedback) override;
  std::string exhausted() const override { return stop_reason_(); }

  /// s_t for the LLM selector: best so far, last feedback, directions chosen so far.
  llm::SearchState search_state() const;

 private:
  struct Planned {
    memory::Strategy strategy;
    Proposal parent;
  };
  /// Extracts and repairs the kernel of `reply` into `proposal`; false (failure set) if none.
  bool take_kernel(Proposal& proposal, const llm::ChatResult& reply);
  /// The native kernel or the ModelNew module of `content`, repaired, with notes for the log;
  /// nullopt when a native reply holds no code.
  std::optional<llm::RepairResult> extract_source(const std::string& content, bool* truncated,
                                                  std::string* note) const;
  /// ".py" for ModelNew languages, else the backend's source extension.
  std::string source_extension() const;
  bool model_new() const { return is_model_new(options_.language); }
  llm::KernelState kernel_state(const Proposal& proposal) const;
  llm::StrategyContext strategy_context(const memory::Strategy& strategy) const;
  llm::ChatRequest request(std::vector<llm::ChatMessage> messages, const std::string& purpose,
                           const std::string& label) const;

  llm::ChatClient& client_;
  const llm::PromptBuilder& prompts_;
  memory::Store& store_;
  const Task& task_;
  LlmGeneratorOptions options_;
  std::function<std::string()> stop_reason_;
  llm::LlmLogSink log_;
  int64_t bytes_moved_ = 0;
  std::optional<double> flops_;

  mutable std::mutex mutex_;
  std::map<std::string, Planned> planned_;                              // by proposal id
  std::set<std::string> first_ids_;  // proposals to write from the reference (first.md)
  std::map<std::string, std::vector<llm::ChatMessage>> conversations_;  // by proposal id
  std::map<std::string, int> repairs_;                                  // repairs asked, by root id
  std::map<std::string, Feedback> outcomes_;                            // by proposal id
  std::optional<llm::FeedbackContext> last_feedback_;
  std::string best_id_;
  std::vector<std::string> prefix_;  // directions written, in order
};

}  // namespace kforge::generation
