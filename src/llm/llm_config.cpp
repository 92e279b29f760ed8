#include "llm/llm_config.h"

#include <toml++/toml.h>

#include <cstdlib>
#include <filesystem>

#include "common/error.h"
#include "common/secret_environment.h"

namespace kforge::llm {
namespace fs = std::filesystem;

std::optional<std::string> process_env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return withdrawn_value(name);
  return std::string(value);
}

namespace {

std::string default_config_path(const EnvLookup& env) {
  fs::path base;
  if (auto xdg = env("XDG_CONFIG_HOME"); xdg && !xdg->empty()) {
    base = *xdg;
  } else if (auto home = env("HOME"); home && !home->empty()) {
    base = fs::path(*home) / ".config";
  } else {
    return "";
  }
  fs::path path = base / "kforge" / "llm.toml";
  return fs::exists(path) ? path.string() : "";
}

template <typename T>
void read_key(const toml::table& table, const std::string& where, const char* key, T& out) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return;
  std::optional<T> value;
  if constexpr (std::is_same_v<T, std::string>) {
    value = node->value<std::string>();
  } else if constexpr (std::is_same_v<T, int>) {
    value = node->value<int>();
  } else {
    value = node->value<double>();  // integers are accepted as doubles
  }
  if (!value) throw Error(where + ": " + key + ": wrong type");
  out = *value;
}

void read_file_config(const std::string& path, LlmConfig& config, const EnvLookup& env) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw Error(path + ": " + std::string(e.description()));
  }
  static const char* const kKeys[] = {
      "base_url",          "model",       "api_key",           "api_key_env",   "connect_timeout_s",
      "request_timeout_s", "max_retries", "backoff_initial_s", "backoff_max_s", "max_concurrency",
      "temperature",       "max_tokens"};
  for (const auto& [key, value] : table) {
    bool known = false;
    for (const char* k : kKeys) known = known || key.str() == k;
    if (!known) throw Error(path + ": " + std::string(key.str()) + ": unknown key");
  }
  read_key(table, path, "base_url", config.base_url);
  read_key(table, path, "model", config.model);
  read_key(table, path, "api_key", config.api_key);
  std::string key_env;
  read_key(table, path, "api_key_env", key_env);
  if (!key_env.empty()) {
    config.key_variables.push_back(key_env);
    if (auto key = env(key_env)) config.api_key = *key;
  }
  read_key(table, path, "connect_timeout_s", config.connect_timeout_s);
  read_key(table, path, "request_timeout_s", config.request_timeout_s);
  read_key(table, path, "max_retries", config.max_retries);
  read_key(table, path, "backoff_initial_s", config.backoff_initial_s);
  read_key(table, path, "backoff_max_s", config.backoff_max_s);
  read_key(table, path, "max_concurrency", config.max_concurrency);
  if (table.contains("temperature")) {
    double t = 0;
    read_key(table, path, "temperature", t);
    config.temperature = t;
  }
  if (table.contains("max_tokens")) {
    int n = 0;
    read_key(table, path, "max_tokens", n);
    config.max_tokens = n;
  }
}

void check_ranges(const LlmConfig& c, const std::string& where) {
  auto fail = [&](const std::string& key, const std::string& expected) {
    throw Error(where + ": " + key + ": expected " + expected);
  };
  if (!(c.connect_timeout_s > 0)) fail("connect_timeout_s", "a positive number of seconds");
  if (!(c.request_timeout_s > 0)) fail("request_timeout_s", "a positive number of seconds");
  if (c.max_retries < 0 || c.max_retries > 100) fail("max_retries", "0..100");
  if (!(c.backoff_initial_s >= 0)) fail("backoff_initial_s", "a number of seconds >= 0");
  if (!(c.backoff_max_s >= c.backoff_initial_s)) fail("backoff_max_s", ">= backoff_initial_s");
  if (c.max_concurrency < 1 || c.max_concurrency > 256) fail("max_concurrency", "1..256");
  if (c.max_tokens && *c.max_tokens < 1) fail("max_tokens", "a positive integer");
}

}  // namespace

LlmConfig load_llm_config(const std::string& file_path, const EnvLookup& env) {
  LlmConfig config;
  std::string path = file_path.empty() ? default_config_path(env) : file_path;
  if (!file_path.empty() && !fs::exists(file_path)) {
    throw Error(file_path + ": LLM config file not found");
  }
  if (!path.empty()) read_file_config(path, config, env);
  if (auto v = env("KFORGE_LLM_BASE_URL"); v && !v->empty()) config.base_url = *v;
  if (auto v = env("KFORGE_LLM_MODEL"); v && !v->empty()) config.model = *v;
  config.key_variables.push_back("KFORGE_LLM_API_KEY");
  if (auto v = env("KFORGE_LLM_API_KEY"); v && !v->empty()) config.api_key = *v;
  check_ranges(config, path.empty() ? "LLM config" : path);
  return config;
}

LlmConfig load_llm_config_from_environment(const std::string& file_path) {
  LlmConfig config = load_llm_config(file_path, process_env);
  for (const std::string& name : config.key_variables) withdraw_environment_variable(name);
  return config;
}

std::string missing_endpoint_message(const LlmConfig& config) {
  std::string missing;
  if (config.base_url.empty()) missing = "KFORGE_LLM_BASE_URL";
  if (config.model.empty())
    missing += std::string(missing.empty() ? "" : " and ") + "KFORGE_LLM_MODEL";
  if (missing.empty()) return "";
  return "--generator llm needs an OpenAI-compatible endpoint: set " + missing +
         " (e.g. KFORGE_LLM_BASE_URL=http://127.0.0.1:8000/v1 KFORGE_LLM_MODEL=<model>, plus "
         "KFORGE_LLM_API_KEY for hosted APIs) or the same keys in a config file (--llm-config); "
         "or run without an LLM with --generator templates";
}

std::string chat_completions_url(const LlmConfig& config) {
  std::string base = config.base_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/chat/completions";
}

}  // namespace kforge::llm
