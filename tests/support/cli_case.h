// What the end-to-end tests of the kforge command line share: a fresh folder per test, the
// kforge executable run with its caches and memory inside that folder, and the small PyTorch
// problems several of them feed it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process/subprocess.h"

namespace kforge::testing {

/// A test with its own folder, $TMPDIR/<prefix><test name>, made empty before and removed after.
class CliCase : public ::testing::Test {
 protected:
  explicit CliCase(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override;
  void TearDown() override;

  /// Writes `text` to dir_/name and returns the path.
  std::filesystem::path write(const std::string& name, const std::string& text) const;
  /// Runs kforge with `args` (600 s at most), its artifact cache and memory in dir_, and
  /// KFORGE_PYTHON set to the tests' Python (support/test_python.h).
  process::CommandResult kforge(const std::vector<std::string>& args) const;

  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

/// The JSON object that starts at the first "{\n" of a command's output (its --json print;
/// stderr lines before it are skipped); null when there is none.
nlohmann::json json_in(const std::string& output);

/// forward(A, s) = A * s with the scalar after the tensor (as KernelBench 5): no built-in family
/// computes it, and its reference must be given s.
extern const char* const kScaleByScalarProblem;

/// A cumulative sum (no built-in family computes it) that derives at small sizes, while at its
/// own sizes its tensors need terabytes: its reference cannot run.
extern const char* const kTooLargeProblem;

/// A native cpu kernel of kScaleByScalarProblem: y = A * scalars[0].
extern const char* const kScaleByScalarKernel;

}  // namespace kforge::testing
