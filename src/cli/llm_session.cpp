#include "cli/llm_session.h"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "common/error.h"
#include "common/files.h"
#include "common/paths.h"

namespace kforge::cli {
namespace fs = std::filesystem;

llm::LlmConfig resolve_llm_config(const LlmCommandOptions& options) {
  llm::LlmConfig config = llm::load_llm_config_from_environment(options.config_path);
  if (options.replay_run.empty()) {
    if (std::string missing = llm::missing_endpoint_message(config); !missing.empty()) {
      throw Error(missing);
    }
    return config;
  }
  // A replay asks what the recorded run asked: same model and sampling settings (they are part
  // of each request's hash). No endpoint is needed.
  fs::path run_json = fs::path(options.replay_run) / "run.json";
  nlohmann::json recorded = with_context(
      "--replay " + options.replay_run, [&] { return nlohmann::json::parse(read_file(run_json)); });
  if (!recorded.contains("llm") || !recorded["llm"].is_object()) {
    throw Error("--replay: " + run_json.string() +
                ": llm: missing (the run was not made with "
                "--generator llm)");
  }
  const nlohmann::json& llm = recorded["llm"];
  config.model = llm.value("model", "");
  config.temperature = llm.contains("temperature") && llm["temperature"].is_number()
                           ? std::optional<double>(llm["temperature"].get<double>())
                           : std::nullopt;
  config.max_tokens = llm.contains("max_tokens") && llm["max_tokens"].is_number()
                          ? std::optional<int>(llm["max_tokens"].get<int>())
                          : std::nullopt;
  return config;
}

LlmSession::LlmSession(const LlmCommandOptions& options, llm::LlmConfig config, const Task& task,
                       const std::string& backend, KernelLanguage language,
                       memory::Store& store, report::RunDirectory& run_dir,
                       const std::atomic<bool>& interrupted)
    : config_(std::move(config)), options_(options), run_dir_(run_dir), interrupted_(interrupted) {
  const fs::path root = resource_root();
  const std::string prices_path = options.prices_path.empty()
                                      ? (root / "knowledge" / "llm_prices.toml").string()
                                      : options.prices_path;
  llm::PriceTable prices = llm::PriceTable::load(prices_path);
  if (!prices.price(config_.model)) {
    std::cerr << "kforge: note: no price for model '" << config_.model << "' in " << prices_path
              << ": its tokens count as $0 and --max-cost-usd cannot cap them\n";
  }
  llm::RecorderOptions recorder;
  recorder.transcript_dir = run_dir.path() / "llm";
  recorder.budget_usd = options.budget_usd;
  if (!options.replay_run.empty()) {
    recorder.replay_dir = fs::path(options.replay_run) / "llm";
  } else {
    live_ = std::make_unique<llm::CurlChatClient>(config_, &interrupted_);
  }
  recorder_ = std::make_unique<llm::RecordingChatClient>(live_.get(), std::move(prices), recorder);
  library_ = std::make_unique<llm::PromptLibrary>(root / "prompts");
  // What defines the right answer is what the model is shown: a PyTorch problem's module (the
  // torch reference worker runs it), else the backend's native reference.
  const std::string reference_path = task.has_torch_reference()
                                         ? task.reference_paths.at("torch")
                                         : task.reference_paths.at(backend);
  prompts_ = std::make_unique<llm::PromptBuilder>(
      *library_, task, backend, read_file(root / "include" / "kforge" / "kernel.h"),
      with_context("reference " + reference_path, [&] { return read_file(reference_path); }),
      language);

  llm::LlmLogSink log = [this](const std::string& line, const nlohmann::json& event) {
    if (!line.empty()) std::cerr << line << "\n";
    run_dir_.append_event(event);
  };
  auto stop_reason = [this]() -> std::string {
    if (interrupted_.load()) return "interrupted (Ctrl-C)";
    if (recorder_->budget_exhausted()) {
      return fmt::format("LLM budget reached: ${:.4f} spent of ${:.4f} (--max-cost-usd)",
                         recorder_->usage().cost_usd, recorder_->budget_usd());
    }
    return "";
  };
  generation::LlmGeneratorOptions generator_options{backend, config_.model, config_.temperature,
                                                    config_.max_tokens, language};
  generator_ = std::make_unique<generation::LlmGenerator>(*recorder_, *prompts_, store, task,
                                                          generator_options, stop_reason, log);
  selector_ = std::make_unique<llm::LlmStrategySelector>(
      *recorder_, *prompts_, config_.model, config_.temperature, store,
      [this] { return generator_->search_state(); }, log);
  use_selector_ = options.selector != "ucb1";
}

nlohmann::json LlmSession::describe() const {
  nlohmann::json j = {{"model", config_.model},
                      {"base_url", options_.replay_run.empty() ? config_.base_url : ""},
                      {"replay_of", options_.replay_run},
                      {"budget_usd", options_.budget_usd},
                      {"selector", use_selector_ ? "llm" : "ucb1"},
                      {"max_concurrency", config_.max_concurrency},
                      {"request_timeout_s", config_.request_timeout_s}};
  j["temperature"] = config_.temperature ? nlohmann::json(*config_.temperature) : nlohmann::json();
  j["max_tokens"] = config_.max_tokens ? nlohmann::json(*config_.max_tokens) : nlohmann::json();
  return j;
}

nlohmann::json LlmSession::usage_json() const {
  llm::LlmUsage u = recorder_->usage();
  return {{"model", config_.model},
          {"requests", u.requests},
          {"failures", u.failures},
          {"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"cost_usd", u.cost_usd},
          {"budget_usd", options_.budget_usd},
          {"latency_s", u.latency_s},
          {"selector_fallbacks", selector_->fallbacks()}};
}

std::string LlmSession::usage_line() const {
  llm::LlmUsage u = recorder_->usage();
  return fmt::format(
      "llm: {} answers, {} failed requests, {} prompt + {} completion tokens, "
      "${:.4f}{}; transcripts in {}",
      u.requests, u.failures, u.prompt_tokens, u.completion_tokens, u.cost_usd,
      options_.budget_usd > 0 ? fmt::format(" of ${:.2f}", options_.budget_usd) : "",
      (run_dir_.path() / "llm").string());
}

}  // namespace kforge::cli
