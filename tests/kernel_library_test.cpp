// The layout of the built-in kernels' shared code (kernels/README.md): include/kforge/ is the
// kernel ABI only, and every kforge header a built-in kernel includes from kernels/ lies in a
// folder the artifact key hashes (common/, cpu/common/, cuda/common/; headers_digest in
// src/compile/toolchain_compiler.cpp), so that editing it rebuilds the kernels instead of
// reusing binaries built against its old text.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace {
namespace fs = std::filesystem;

const fs::path kRoot = KFORGE_SOURCE_DIR;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The folders headers_digest covers, relative to the include dir <root>/kernels.
bool in_hashed_folder(const std::string& header) {
  static const std::regex kHashed(R"(^(common|[^/]+/common)/.+)");
  return std::regex_match(header, kHashed);
}

TEST(KernelLibrary, IncludeKforgeHoldsOnlyTheAbi) {
  std::set<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / "include" / "kforge")) {
    if (entry.is_regular_file()) files.insert(entry.path().filename().string());
  }
  // Family libraries go to kernels/<backend>/common/, backend-neutral helpers to kernels/common/.
  EXPECT_EQ(files, std::set<std::string>{"kernel.h"});
}

TEST(KernelLibrary, EveryHeaderABuiltInKernelIncludesIsHashed) {
  static const std::regex kInclude(R"(^\s*#\s*include\s*<([^>]+)>)");
  int resolved = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / "kernels")) {
    const std::string extension = entry.path().extension().string();
    if (!entry.is_regular_file() ||
        (extension != ".cu" && extension != ".cpp" && extension != ".cuh" && extension != ".h")) {
      continue;
    }
    std::istringstream lines(read_text(entry.path()));
    std::string line;
    while (std::getline(lines, line)) {
      std::smatch match;
      if (!std::regex_search(line, match, kInclude)) continue;
      const std::string header = match[1];
      if (!fs::exists(kRoot / "kernels" / header)) continue;  // the ABI, CUDA or the C++ library
      ++resolved;
      EXPECT_TRUE(in_hashed_folder(header))
          << entry.path() << " includes <" << header << ">, which is outside common/, "
          << "cpu/common/ and cuda/common/: the artifact key would not cover its edits";
    }
  }
  EXPECT_GE(resolved, 30) << "the kernels include their shared headers from kernels/";
}

}  // namespace
