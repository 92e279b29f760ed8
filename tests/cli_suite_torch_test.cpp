// End-to-end tests of `kforge suite` over a folder of PyTorch problem files: every problem is
// derived up front in one Python process, each task's `kforge optimize` child runs the derived
// TOML (it does not derive again), a problem that fails to derive (or hangs) is its row, and a
// continued suite derives again only what changed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_python.h"
#include "common/files.h"
#include "common/hash.h"
#include "process/subprocess.h"
#include "support/cli_case.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

// A user's own softmax over the rows of a small matrix: the softmax family serves it.
constexpr const char* kSoftmax = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


rows = 24
cols = 300


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return []
)";

// Derives, but no built-in family computes a cumulative sum.
constexpr const char* kCumsum = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1)


rows = 64
cols = 300


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return []
)";

constexpr const char* kSyntaxError = "import torch\nclass Model(:\n    pass\ndef get_inputs():\n";

// Its forward never returns: the derivation's time limit stops it.
constexpr const char* kHangs = R"(import time
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        while True:
            time.sleep(0.05)


n = 20


def get_inputs():
    return [torch.rand(n)]


def get_init_inputs():
    return []
)";

class CliSuiteTorchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_cli_suite_torch_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "problems");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_problem(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / "problems" / name) << text;
  }

  process::CommandResult suite(const std::string& derive_timeout_s = "5",
                               const std::vector<std::string>& more = {}) {
    std::vector<std::string> argv = {"env",
                                     "KFORGE_MEMORY=" + (dir_ / "memory.sqlite").string(),
                                     "KFORGE_CACHE_DIR=" + (dir_ / "cache").string(),
                                     "KFORGE_PYTHON=" + kforge::testing::test_python(),
                                     KFORGE_CLI_PATH,
                                     "suite",
                                     (dir_ / "problems").string(),
                                     "--suite-dir",
                                     suite_dir().string(),
                                     "--derive-timeout-s",
                                     derive_timeout_s,
                                     "--json",
                                     "--backend",
                                     "cpu",
                                     "--steps",
                                     "1",
                                     "--proposals",
                                     "1",
                                     "--final-rounds",
                                     "2"};
    argv.insert(argv.end(), more.begin(), more.end());
    return process::run_command(argv, 600);
  }

  fs::path suite_dir() const { return dir_ / "suite"; }

  nlohmann::json row(const std::string& name) {
    nlohmann::json json = nlohmann::json::parse(read_file(suite_dir() / "suite.json"));
    for (const nlohmann::json& task : json["tasks"]) {
      if (task["name"] == name) return task;
    }
    ADD_FAILURE() << "no row " << name << " in " << json.dump(2);
    return nlohmann::json::object();
  }

  static size_t count(const std::string& text, const std::string& what) {
    size_t found = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++found;
    return found;
  }

  fs::path dir_;
};

TEST_F(CliSuiteTorchTest, ProblemsAreDerivedOnceUpFrontAndChildrenRunTheDerivedTask) {
  write_problem("my_softmax.py", kSoftmax);
  write_problem("cumsum.py", kCumsum);
  write_problem("broken.py", kSyntaxError);
  write_problem("hangs.py", kHangs);
  process::CommandResult result = suite();
  ASSERT_EQ(result.exit_code, 1) << result.output;  // broken and hangs errored
  EXPECT_EQ(count(result.output, "deriving 4 PyTorch problem(s) in one Python process"), 1u)
      << result.output;

  // The served problem: its child ran the derived TOML, which names the problem and its bytes.
  const fs::path toml = suite_dir() / "derived" / "my_softmax.toml";
  ASSERT_TRUE(fs::exists(toml)) << result.output;
  const std::string text = read_file(toml);
  EXPECT_NE(text.find("torch = \"" + (dir_ / "problems" / "my_softmax.py").string() + "\""),
            std::string::npos) << text;
  EXPECT_NE(text.find(sha256_hex(kSoftmax)), std::string::npos) << text;
  EXPECT_TRUE(row("my_softmax")["correct"].get<bool>()) << result.output;
  EXPECT_EQ(row("my_softmax")["task_path"], (dir_ / "problems" / "my_softmax.py").string());
  const nlohmann::json run = nlohmann::json::parse(read_file(suite_dir() / "my_softmax" / "run.json"));
  EXPECT_EQ(run["task_path"], toml.string());
  EXPECT_EQ(read_file(suite_dir() / "logs" / "my_softmax.log").rfind("$ ", 0), 0u);
  EXPECT_NE(read_file(suite_dir() / "logs" / "my_softmax.log").find("optimize " + toml.string()),
            std::string::npos);
  // Its reference worker was forked from the suite's server (cli/torch_fork_server.h), started
  // once (not killed with the thread that started it), as was the check batch's.
  EXPECT_EQ(count(result.output, "torch reference workers are forked from a process that "
                                 "imported torch once"), 1u) << result.output;
  for (const char* log : {"my_softmax.log", "checks-cumsum.log"}) {
    const std::string text = read_file(suite_dir() / "logs" / log);
    EXPECT_EQ(text.find("started without the fork server"), std::string::npos) << text;
    EXPECT_EQ(text.find("restarting the reference worker"), std::string::npos) << text;
  }

  // Problems that do not derive are rows with the derivation's message, and no child ran.
  EXPECT_EQ(row("broken")["exit"], "not derived");
  EXPECT_NE(row("broken")["failure"].get<std::string>().find(
                (dir_ / "problems" / "broken.py").string() + ": line 2: syntax error"),
            std::string::npos) << row("broken").dump(2);
  EXPECT_NE(row("hangs")["failure"].get<std::string>().find("did not finish in 5 s"),
            std::string::npos) << row("hangs").dump(2);
  EXPECT_FALSE(fs::exists(suite_dir() / "broken"));
  // A derived problem no family serves under the templates generator: a row that says so and
  // names the families tried, its log why each did not fit; no optimize child ran, and it is no
  // error. Its reference still ran (kforge task --check-batch), and the row has its time.
  EXPECT_EQ(row("cumsum")["status"], "not served") << row("cumsum").dump(2);
  EXPECT_EQ(row("cumsum")["exit"], "not run");
  EXPECT_NE(row("cumsum")["failure"].get<std::string>().find("no built-in kernel family"),
            std::string::npos) << row("cumsum").dump(2);
  EXPECT_NE(row("cumsum")["failure"].get<std::string>().find("families tried: "),
            std::string::npos) << row("cumsum").dump(2);
  EXPECT_NE(read_file(suite_dir() / "logs" / "cumsum.log").find("  softmax: "), std::string::npos);
  EXPECT_FALSE(fs::exists(suite_dir() / "cumsum"));
  EXPECT_NE(read_file(suite_dir() / "suite.md").find("Not served"), std::string::npos);
  // The page of the suite, with the row and a link to the served task's own page.
  EXPECT_NE(read_file(suite_dir() / "suite.html").find("<a href=\"my_softmax/report.html\">"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(suite_dir() / "my_softmax" / "report.html"));
  EXPECT_EQ(row("cumsum")["reference_check"], "ran") << row("cumsum").dump(2);
  EXPECT_GT(row("cumsum")["reference_ms"].get<double>(), 0.0) << row("cumsum").dump(2);
  const nlohmann::json check =
      nlohmann::json::parse(read_file(suite_dir() / "checks" / "cumsum.json"));
  EXPECT_TRUE(check["ok"].get<bool>()) << check.dump(2);
  EXPECT_EQ(check["backend"], "cpu");
  EXPECT_NE(read_file(suite_dir() / "logs" / "checks-cumsum.log").find("[1/1] cumsum: reference of"),
            std::string::npos);
  // The served problem's row has the reference's final-rung time.
  EXPECT_GT(row("my_softmax")["reference_ms"].get<double>(), 0.0) << row("my_softmax").dump(2);

  const nlohmann::json derivation =
      nlohmann::json::parse(read_file(suite_dir() / "derived" / "derivation.json"));
  ASSERT_EQ(derivation["problems"].size(), 4u) << derivation.dump(2);
  for (const nlohmann::json& problem : derivation["problems"]) {
    const bool fails = problem["label"] == "broken" || problem["label"] == "hangs";
    EXPECT_EQ(problem["outcome"], fails ? "error" : "derived") << problem.dump(2);
  }
}

TEST_F(CliSuiteTorchTest, ContinuedSuiteDerivesAgainOnlyChangedOrUnfinishedProblems) {
  write_problem("cumsum.py", kCumsum);
  write_problem("broken.py", kSyntaxError);
  process::CommandResult first = suite();
  ASSERT_EQ(first.exit_code, 1) << first.output;
  const fs::path toml = suite_dir() / "derived" / "cumsum.toml";
  ASSERT_TRUE(fs::exists(toml)) << first.output;

  // An unfinished run of the derived task (as if killed) is moved aside and the same TOML, which
  // is reused (the problem did not change), decides again: no family serves it. The broken one
  // is derived again.
  fs::create_directories(suite_dir() / "cumsum");
  std::ofstream(suite_dir() / "cumsum" / "run.json") << nlohmann::json({{"task_path", toml.string()}});
  process::CommandResult second = suite();
  ASSERT_EQ(second.exit_code, 1) << second.output;
  EXPECT_NE(second.output.find("1 derived task(s) of an earlier run reused"), std::string::npos)
      << second.output;
  EXPECT_NE(second.output.find("deriving 1 PyTorch problem(s)"), std::string::npos)
      << second.output;
  EXPECT_NE(second.output.find("cumsum is unfinished; moved to"), std::string::npos)
      << second.output;
  EXPECT_NE(second.output.find("not served: " + (dir_ / "problems" / "cumsum.py").string()),
            std::string::npos) << second.output;
  // Its reference ran in the first suite run, for the same task: read back, not run again.
  EXPECT_NE(second.output.find("its reference ran in an earlier suite run"), std::string::npos)
      << second.output;
  EXPECT_EQ(row("cumsum")["reference_check"], "ran");
  // ... and its row keeps what the check cost when it ran (the suite's wall total stays whole).
  const nlohmann::json earlier_check =
      nlohmann::json::parse(read_file(suite_dir() / "checks" / "cumsum.json"));
  EXPECT_GT(earlier_check["wall_s"].get<double>(), 0.0) << earlier_check.dump(2);
  EXPECT_GE(row("cumsum")["wall_s"].get<double>(), earlier_check["wall_s"].get<double>())
      << row("cumsum").dump(2);

  // A changed problem file is derived again: its new bytes' sha256 is in the new TOML.
  const std::string changed = std::string(kCumsum) + "# edited\n";
  write_problem("cumsum.py", changed);
  process::CommandResult third = suite();
  ASSERT_EQ(third.exit_code, 1) << third.output;
  EXPECT_NE(third.output.find("deriving 2 PyTorch problem(s)"), std::string::npos)
      << third.output;
  EXPECT_EQ(third.output.find("reused"), std::string::npos) << third.output;
  EXPECT_NE(read_file(toml).find(sha256_hex(changed)), std::string::npos);
  EXPECT_NE(third.output.find("its reference is checked with the next batch"), std::string::npos)
      << third.output;
}

TEST_F(CliSuiteTorchTest, AProblemWhoseReferenceCannotRunIsAnErrorRowAndTheSuiteGoesOn) {
  // One batch checks all three: the check after the failing one still runs on its workers.
  write_problem("cumsum.py", kCumsum);
  write_problem("too_large.py", testing::kTooLargeProblem);
  write_problem("z_cumsum.py", kCumsum);
  process::CommandResult result = suite();
  ASSERT_EQ(result.exit_code, 1) << result.output;  // too_large errored
  EXPECT_NE(result.output.find("checking 3 unserved problem(s)' references in one batch"),
            std::string::npos) << result.output;
  EXPECT_EQ(row("z_cumsum")["reference_check"], "ran") << row("z_cumsum").dump(2);
  EXPECT_EQ(row("too_large")["status"], "error") << row("too_large").dump(2);
  EXPECT_EQ(row("too_large")["exit"], "reference check failed");
  EXPECT_NE(row("too_large")["failure"].get<std::string>().find(
                "its reference does not run: "),
            std::string::npos) << row("too_large").dump(2);
  EXPECT_NE(row("too_large")["failure"].get<std::string>().find("workload 'problem' needs"),
            std::string::npos) << row("too_large").dump(2);
  EXPECT_TRUE(row("too_large")["reference_ms"].is_null());
  EXPECT_EQ(row("cumsum")["status"], "not served");
  EXPECT_EQ(row("cumsum")["reference_check"], "ran");
}

TEST_F(CliSuiteTorchTest, NoReferenceCheckLeavesUnservedProblemsUnrun) {
  write_problem("cumsum.py", kCumsum);
  process::CommandResult result = suite("5", {"--no-reference-check"});
  ASSERT_EQ(result.exit_code, 3) << result.output;  // not served: not correct, no error
  EXPECT_EQ(row("cumsum")["status"], "not served");
  EXPECT_EQ(row("cumsum")["reference_check"], "");
  EXPECT_TRUE(row("cumsum")["reference_ms"].is_null());
  EXPECT_FALSE(fs::exists(suite_dir() / "checks" / "cumsum.json"));
}

TEST_F(CliSuiteTorchTest, DeriveTimeoutMustBePositive) {
  write_problem("cumsum.py", kCumsum);
  process::CommandResult refused = suite("0");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--derive-timeout-s"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(suite_dir()));
}

}  // namespace
}  // namespace kforge
