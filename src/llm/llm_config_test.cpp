// Where the endpoint comes from: environment over file over defaults, and the message when none.
#include "llm/llm_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "common/error.h"
#include "common/files.h"

namespace kforge::llm {
namespace {
namespace fs = std::filesystem;

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(LlmConfigTest, EnvironmentOverridesTheFile) {
  fs::path file = fs::temp_directory_path() / "kforge_llm_config_test.toml";
  write_file_atomically(file,
                        "base_url = \"http://file/v1\"\nmodel = \"file-model\"\n"
                        "api_key_env = \"MY_KEY\"\nmax_concurrency = 4\ntemperature = 0.2\n");
  LlmConfig config = load_llm_config(
      file.string(), env_of({{"KFORGE_LLM_MODEL", "env-model"}, {"MY_KEY", "sk-from-file-env"}}));
  EXPECT_EQ(config.base_url, "http://file/v1");
  EXPECT_EQ(config.model, "env-model");
  EXPECT_EQ(config.api_key, "sk-from-file-env");
  EXPECT_EQ(config.max_concurrency, 4);
  EXPECT_DOUBLE_EQ(*config.temperature, 0.2);
  EXPECT_EQ(chat_completions_url(config), "http://file/v1/chat/completions");
  fs::remove(file);
}

TEST(LlmConfigTest, UnknownKeysAndBadValuesNameFileAndKey) {
  fs::path file = fs::temp_directory_path() / "kforge_llm_config_bad.toml";
  write_file_atomically(file, "modle = \"x\"\n");
  EXPECT_THROW(load_llm_config(file.string(), env_of({})), Error);
  write_file_atomically(file, "max_concurrency = 0\n");
  try {
    load_llm_config(file.string(), env_of({}));
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_concurrency: expected 1..256"), std::string::npos)
        << e.what();
  }
  fs::remove(file);
  EXPECT_THROW(load_llm_config("/nonexistent/llm.toml", env_of({})), Error);
}

TEST(LlmConfigTest, MissingEndpointNamesTheVariablesAndSuggestsTemplates) {
  LlmConfig config = load_llm_config("", env_of({{"HOME", "/nonexistent"}}));
  std::string message = missing_endpoint_message(config);
  EXPECT_NE(message.find("KFORGE_LLM_BASE_URL"), std::string::npos) << message;
  EXPECT_NE(message.find("KFORGE_LLM_MODEL"), std::string::npos) << message;
  EXPECT_NE(message.find("--generator templates"), std::string::npos) << message;
  config.base_url = "http://x/v1";
  config.model = "m";
  EXPECT_EQ(missing_endpoint_message(config), "");
}

}  // namespace
}  // namespace kforge::llm
