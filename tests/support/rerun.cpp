#include "support/rerun.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "common/error.h"
#include "process/subprocess.h"

extern char** environ;

namespace kforge::testing {

constexpr const char* kRerunVariable = "KFORGE_TEST_RERUN";

bool in_rerun() {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const char* rerun = std::getenv(kRerunVariable);
  return test != nullptr && rerun != nullptr &&
         std::string(rerun) == std::string(test->test_suite_name()) + "." + test->name();
}

RerunResult rerun_this_test(const std::vector<std::string>& extra_environment, double timeout_s) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  if (test == nullptr) throw Error("rerun_this_test: no test is running");
  const std::string name = std::string(test->test_suite_name()) + "." + test->name();
  process::SpawnOptions options;
  options.argv = {std::filesystem::read_symlink("/proc/self/exe").string(),
                  "--gtest_filter=" + name};
  std::vector<std::string> environment;
  for (char** entry = environ; entry && *entry; ++entry) environment.push_back(*entry);
  environment.insert(environment.end(), extra_environment.begin(), extra_environment.end());
  environment.push_back(std::string(kRerunVariable) + "=" + name);
  options.environment = environment;
  options.pipe_stdin = false;
  options.merge_stderr = true;
  process::Subprocess child(options);
  std::optional<process::ExitStatus> status = child.wait(timeout_s);
  RerunResult result;
  if (!status) {
    child.kill();
    result.output = child.take_stdout() + "\n[rerun of " + name + " killed after " +
                    std::to_string(timeout_s) + " s]";
    return result;
  }
  result.output = child.take_stdout();
  result.passed = status->exited && status->exit_code == 0;
  if (!result.passed) result.output += "\n[rerun of " + name + ": " + status->describe() + "]";
  return result;
}

}  // namespace kforge::testing
