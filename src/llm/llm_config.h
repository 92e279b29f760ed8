// Where the LLM endpoint is and how to talk to it: the environment (KFORGE_LLM_BASE_URL,
// KFORGE_LLM_MODEL, KFORGE_LLM_API_KEY) over an optional TOML file over the defaults.
//
// Config file (TOML, every key optional; `kforge optimize --llm-config FILE`, else
// $XDG_CONFIG_HOME/kforge/llm.toml or ~/.config/kforge/llm.toml when it exists):
//   base_url = "https://api.deepseek.com/v1"   # up to, not including, /chat/completions
//   model = "deepseek-reasoner"
//   api_key = "..."          # better: api_key_env = "DEEPSEEK_API_KEY" (read from that variable)
//   connect_timeout_s = 10   request_timeout_s = 600   max_retries = 4
//   backoff_initial_s = 1    backoff_max_s = 60        max_concurrency = 2
//   temperature = 0.6        max_tokens = 8192
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kforge::llm {

struct LlmConfig {
  std::string base_url;  // e.g. "http://127.0.0.1:8000/v1"; empty = not configured
  std::string model;     // e.g. "deepseek-reasoner"
  std::string api_key;   // may be empty (local servers); never written anywhere
  /// The environment variables the key was looked up in: api_key_env's, KFORGE_LLM_API_KEY.
  std::vector<std::string> key_variables;
  double connect_timeout_s = 10.0;
  // Reasoning models think for minutes before the first token; 10 minutes bounds one answer.
  double request_timeout_s = 600.0;
  int max_retries = 4;             // retries after the first attempt (429, 5xx, network)
  double backoff_initial_s = 1.0;  // first retry waits ~this, doubling, with full jitter
  double backoff_max_s = 60.0;     // cap of one wait, Retry-After included
  int max_concurrency = 2;         // requests in flight at once (the `llm` pool)
  std::optional<double> temperature = 0.6;
  std::optional<int> max_tokens;  // unset: the server's default
};

/// Reads a variable; returns nullopt when unset. Tests pass their own.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

/// The process environment, then what common/secret_environment.h withdrew from it.
std::optional<std::string> process_env(const std::string& name);

/// Loads the configuration: defaults, then `file_path` (if non-empty; it must exist) or the
/// default config file (if it exists), then the environment. Throws Error naming the file and
/// key when the file is malformed or a value is out of range.
LlmConfig load_llm_config(const std::string& file_path, const EnvLookup& env = process_env);

/// load_llm_config from the process environment, after which every variable the key was looked
/// up in (key_variables) is withdrawn from it (withdraw_environment_variable): not inherited by
/// any child spawned later, erased from /proc/self/environ. Throws as load_llm_config does.
LlmConfig load_llm_config_from_environment(const std::string& file_path);

/// Empty when `config` names an endpoint and a model; else a message that says which variables
/// (or config keys) to set and suggests the templates generator.
std::string missing_endpoint_message(const LlmConfig& config);

/// "<base_url>/chat/completions" without a doubled slash.
std::string chat_completions_url(const LlmConfig& config);

}  // namespace kforge::llm
