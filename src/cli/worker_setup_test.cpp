#include "cli/worker_setup.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace kforge::cli {
namespace {

bool has_entry(const std::vector<std::string>& environment, const std::string& entry) {
  return std::find(environment.begin(), environment.end(), entry) != environment.end();
}

TEST(WorkerSetupTest, PythonCandidatesBuildUnderKforgesArtifactCache) {
  ::setenv("KFORGE_CACHE_DIR", "/tmp/kforge-worker-setup-cache", 1);
  Task task;
  task.torch_reference = nlohmann::json::object({{"format", "kforge-torch-task"}});
  const WorkerConfigs configs = worker_configs(task, "cpu", 0);
  ::unsetenv("KFORGE_CACHE_DIR");
  ASSERT_TRUE(configs.python_candidate.environment.has_value());
  EXPECT_TRUE(has_entry(*configs.python_candidate.environment,
                        "KFORGE_TORCH_EXTENSIONS_ROOT=/tmp/kforge-worker-setup-cache/"
                        "torch_extensions"));
  // The reference worker runs no candidate code: it gets no build folder.
  ASSERT_TRUE(configs.reference.environment.has_value());
  for (const std::string& entry : *configs.reference.environment) {
    EXPECT_EQ(entry.rfind("KFORGE_TORCH_EXTENSIONS_ROOT=", 0), std::string::npos) << entry;
  }
}

}  // namespace
}  // namespace kforge::cli
