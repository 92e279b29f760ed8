// The LLM generation plane of one `kforge optimize --generator llm` run, wired from its real
// parts: config (env/file), libcurl client, transcript/cache/replay/budget recorder, prompt
// templates, the generator and the LLM strategy selector. Ctrl-C sets `interrupted`, which
// cancels requests in flight and stops the search (the run still ends with its best kernel).
#pragma once

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "generation/llm_generator.h"
#include "llm/curl_chat_client.h"
#include "llm/llm_config.h"
#include "llm/llm_selector.h"
#include "llm/prompt_builder.h"
#include "llm/recording_client.h"
#include "memory/store.h"
#include "report/run_directory.h"
#include "search/optimizer.h"
#include "core/task.h"

namespace kforge::cli {

struct LlmCommandOptions {
  std::string config_path;        // --llm-config; empty: default file if present
  std::string prices_path;        // --llm-prices; empty: <root>/knowledge/llm_prices.toml
  std::string replay_run;         // --replay: a previous run directory; empty: live
  std::string selector = "auto";  // auto (llm with --generator llm) | llm | ucb1
  /// The plane's cap in USD: the run's --max-cost-usd less what earlier sessions of a resumed
  /// run spent (run_optimize sets it); <= 0 means no cap.
  double budget_usd = 1.0;
};

/// Endpoint settings for this run: the config, or in replay the model and temperature the
/// recorded run used (from its run.json). Throws Error with missing_endpoint_message() when no
/// endpoint is configured and no replay is asked, or when the replay run is unreadable.
llm::LlmConfig resolve_llm_config(const LlmCommandOptions& options);

class LlmSession {
 public:
  /// Builds the plane for `task` on `backend`, writing candidates in `language` (native
  /// kernels, or ModelNew modules for a PyTorch problem); transcripts go to <run_dir>/llm.
  /// Keeps references to every argument. Throws Error for a bad price table or prompt folder.
  LlmSession(const LlmCommandOptions& options, llm::LlmConfig config, const Task& task,
             const std::string& backend, KernelLanguage language, memory::Store& store,
             report::RunDirectory& run_dir, const std::atomic<bool>& interrupted);

  generation::Generator& generator() { return *generator_; }
  /// The strategy selector the optimizer should use, or null for UCB1.
  memory::StrategySelector* selector() { return use_selector_ ? selector_.get() : nullptr; }
  /// What to write under "llm" in run.json (never the API key).
  nlohmann::json describe() const;
  /// Requests, tokens, cost and budget so far, for result.json and the summary line.
  nlohmann::json usage_json() const;
  std::string usage_line() const;
  /// USD spent on the model so far in this session (the optimizer's cost meter).
  double cost_usd() const { return recorder_->usage().cost_usd; }

 private:
  llm::LlmConfig config_;
  LlmCommandOptions options_;
  report::RunDirectory& run_dir_;
  const std::atomic<bool>& interrupted_;
  std::unique_ptr<llm::CurlChatClient> live_;
  std::unique_ptr<llm::RecordingChatClient> recorder_;
  std::unique_ptr<llm::PromptLibrary> library_;
  std::unique_ptr<llm::PromptBuilder> prompts_;
  std::unique_ptr<generation::LlmGenerator> generator_;
  std::unique_ptr<llm::LlmStrategySelector> selector_;
  bool use_selector_ = true;
};

}  // namespace kforge::cli
