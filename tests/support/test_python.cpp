#include "support/test_python.h"

#include <cstdlib>
#include <vector>

#include "process/subprocess.h"

namespace kforge::testing {

const std::string& test_python() {
  static const std::string chosen = [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("KFORGE_PYTHON"); env != nullptr && *env != '\0')
      candidates.push_back(env);
    candidates.push_back(KFORGE_TEST_PYTHON);
    candidates.push_back("python3");
    for (const std::string& python : candidates) {
      const process::CommandResult probe =
          process::run_command({python, "-c", "import torch, numpy"}, 120.0);
      if (probe.exit_code == 0) return python;
    }
    return std::string(KFORGE_TEST_PYTHON);
  }();
  return chosen;
}

}  // namespace kforge::testing
