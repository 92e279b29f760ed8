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
  // Under bubblewrap (read-only filesystem) that folder is bound writable for this worker only.
  const std::string extensions = "/tmp/kforge-worker-setup-cache/torch_extensions";
  const auto binds = [&extensions](const worker::Sandbox& sandbox) {
    const auto& argv = sandbox.argv_prefix;
    for (size_t i = 0; i + 2 < argv.size(); ++i) {
      if (argv[i] == "--bind" && argv[i + 1] == extensions) return true;
    }
    return false;
  };
  if (configs.python_candidate.sandbox.mechanism == "bubblewrap") {
    EXPECT_TRUE(binds(configs.python_candidate.sandbox));
  }
  EXPECT_FALSE(binds(configs.candidate.sandbox));
  EXPECT_FALSE(binds(configs.reference.sandbox));
  // The reference worker runs no candidate code: it gets no build folder.
  ASSERT_TRUE(configs.reference.environment.has_value());
  for (const std::string& entry : *configs.reference.environment) {
    EXPECT_EQ(entry.rfind("KFORGE_TORCH_EXTENSIONS_ROOT=", 0), std::string::npos) << entry;
  }
}

}  // namespace
}  // namespace kforge::cli
