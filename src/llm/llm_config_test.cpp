// Where the endpoint comes from: environment over file over defaults, and the message when none.
#include "llm/llm_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "common/error.h"
#include "common/files.h"
#include "process/subprocess.h"
#include "support/rerun.h"

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

std::string read_proc_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The key in kforge's own environment is what a candidate without a PID namespace reads from
// /proc/<parent>/environ. The test reruns itself with two keys exported (one named by the config
// file's api_key_env), so that they are in the child's initial environment block, and checks
// there that loading the config leaves neither in /proc/self/environ nor in what a child gets.
TEST(LlmConfigSecret, KeysLeaveTheInitialEnvironmentBlockAndNoChildInheritsThem) {
  const std::string env_key = "sk-planted-env-4f1d9c";
  const std::string file_key = "sk-planted-file-8a2e7b";
  if (!testing::in_rerun()) {
    const testing::RerunResult child = testing::rerun_this_test(
        {"KFORGE_LLM_API_KEY=" + env_key, "KFORGE_TEST_FILE_KEY=" + file_key}, 120.0);
    EXPECT_TRUE(child.passed) << child.output;
    return;
  }
  // The premise: unsetenv alone would leave both here.
  ASSERT_NE(read_proc_file("/proc/self/environ").find(env_key), std::string::npos);
  ASSERT_NE(read_proc_file("/proc/self/environ").find(file_key), std::string::npos);
  fs::path file = fs::temp_directory_path() / "kforge_llm_config_secret_test.toml";
  write_file_atomically(file, "base_url = \"http://file/v1\"\nmodel = \"m\"\n"
                              "api_key_env = \"KFORGE_TEST_FILE_KEY\"\n");
  const LlmConfig config = load_llm_config_from_environment(file.string());
  fs::remove(file);
  EXPECT_EQ(config.api_key, env_key);  // KFORGE_LLM_API_KEY over api_key_env
  const std::string environ_block = read_proc_file("/proc/self/environ");
  EXPECT_EQ(environ_block.find("sk-planted"), std::string::npos);
  EXPECT_EQ(environ_block.find("KFORGE_LLM_API_KEY"), std::string::npos);
  EXPECT_NE(environ_block.find("KFORGE_TEST_RERUN="), std::string::npos) << "the rest stays";
  EXPECT_EQ(std::getenv("KFORGE_LLM_API_KEY"), nullptr);
  EXPECT_EQ(std::getenv("KFORGE_TEST_FILE_KEY"), nullptr);
  EXPECT_EQ(process_env("KFORGE_TEST_FILE_KEY"), file_key) << "kforge itself still has it";
  // A child spawned with the inherited environment (as compilers and the Python derivation
  // are), printing its own environment and its parent's.
  const process::CommandResult child = process::run_command(
      {"/bin/sh", "-c", "cat /proc/self/environ; cat /proc/$PPID/environ; env"}, 30.0);
  ASSERT_TRUE(child.succeeded()) << child.output;
  EXPECT_NE(child.output.find("KFORGE_TEST_RERUN="), std::string::npos) << child.output;
  EXPECT_EQ(child.output.find("sk-planted"), std::string::npos) << child.output;
  // Loading again finds the withdrawn key.
  EXPECT_EQ(load_llm_config_from_environment("").api_key, env_key);
}

}  // namespace
}  // namespace kforge::llm
