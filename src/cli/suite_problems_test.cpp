#include "cli/suite_problems.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/files.h"

namespace kforge::cli {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// A derived task (docs/torch_tasks.md) of `problem` whose row dimension is called `rows`.
json derived_task(const std::string& problem, const std::string& rows) {
  return {{"format", "kforge-torch-task"},
          {"version", 1},
          {"name", "p"},
          {"problem", problem},
          {"problem_sha256", "00"},
          {"family", "softmax"},
          {"signature",
           {{"tensors",
             {{{"name", "x"}, {"role", "input"}, {"dtype", "f32"}, {"shape", {rows, "cols"}}},
              {{"name", "y"}, {"role", "output"}, {"dtype", "f32"}, {"shape", {rows, "cols"}}}}},
            {"scalars", json::array()}}},
          {"workloads", {{{"name", "problem"}, {"dims", {{rows, 4}, {"cols", 8}}}, {"timed", true}}}},
          {"tolerance", {{"rtol", 1e-4}, {"atol", 1e-6}}},
          {"distributions", {"uniform"}},
          {"torch",
           {{"tensors", {{{"source", "input"}, {"index", 0}}, {{"source", "output"}, {"index", 0}}}},
            {"workloads", {{"problem", {{"constants", json::object()}, {"shapes", {{4, 8}, {4, 8}}}}}}},
            {"double_reference", true}}}};
}

// prepare_suite_problems against a stand-in for `derive --batch` that answers `task` for the
// one problem of the suite.
class SuiteProblemsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_suite_problems_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "suite");
    std::ofstream(problem()) << "class Model: pass\ndef get_inputs(): pass\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path problem() const { return dir_ / "p.py"; }

  std::map<std::string, SuiteProblem> prepare(const json& task) {
    const fs::path script = dir_ / "python";
    const json line = {{"file", problem().string()}, {"ok", true}, {"task", task}, {"seconds", 0.5}};
    std::ofstream(script) << "#!/bin/sh\ncat <<'END'\n" << line.dump() << "\nEND\n";
    fs::permissions(script, fs::perms::owner_all);
    SuiteProblemOptions options;
    options.python = script.string();
    options.say = [this](const std::string& line) { said_ += line + "\n"; };
    return prepare_suite_problems({{"p", problem()}}, dir_ / "suite",
                                  [](const SuiteTask&) { return true; }, options);
  }

  fs::path dir_;
  std::string said_;
};

TEST_F(SuiteProblemsTest, DerivedTaskIsWrittenAsTomlForTheChild) {
  const auto settled = prepare(derived_task(problem().string(), "rows"));
  ASSERT_EQ(settled.count("p"), 1u);
  EXPECT_EQ(settled.at("p").error, "");
  EXPECT_EQ(settled.at("p").toml_path, derived_task_path(dir_ / "suite", "p"));
  EXPECT_DOUBLE_EQ(settled.at("p").derive_s, 0.5);
  EXPECT_TRUE(fs::exists(settled.at("p").toml_path));
  const json record = json::parse(read_file(dir_ / "suite" / "derived" / "derivation.json"));
  EXPECT_EQ(record["problems"][0]["outcome"], "derived");
}

TEST_F(SuiteProblemsTest, TomlThatDoesNotReadBackSendsTheChildToTheProblemFile) {
  // A dimension name TOML cannot hold as a bare key: the TOML would not load, so the child gets
  // the problem file and derives it itself, and no TOML is left to be reused.
  const auto settled = prepare(derived_task(problem().string(), "my rows"));
  ASSERT_EQ(settled.count("p"), 1u);
  EXPECT_EQ(settled.at("p").error, "");
  EXPECT_EQ(settled.at("p").toml_path, problem());
  EXPECT_FALSE(fs::exists(derived_task_path(dir_ / "suite", "p")));
  EXPECT_NE(said_.find("does not read back into the derived task"), std::string::npos) << said_;
}

TEST_F(SuiteProblemsTest, DerivedJsonThatIsNotATaskIsTheProblemsError) {
  json task = derived_task(problem().string(), "rows");
  task.erase("workloads");
  const auto settled = prepare(task);
  ASSERT_EQ(settled.count("p"), 1u);
  EXPECT_NE(settled.at("p").error.find("workloads"), std::string::npos) << settled.at("p").error;
  EXPECT_TRUE(settled.at("p").toml_path.empty());
}

TEST_F(SuiteProblemsTest, ADerivedTaskNoFamilyServesSaysWhichFamiliesWereTried) {
  json task = derived_task(problem().string(), "rows");
  task["family"] = "";
  task["family_misses"] = {{"softmax", "closest differs at 1e-3"}, {"gemv", "no mapping fits"}};
  const auto settled = prepare(task);
  ASSERT_EQ(settled.at("p").toml_path, derived_task_path(dir_ / "suite", "p"));
  const auto why = unserved_reason(settled.at("p").toml_path);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->first.find("no built-in kernel family computes what this module computes"),
            std::string::npos) << why->first;
  EXPECT_NE(why->first.find("(families tried: gemv, softmax)"), std::string::npos) << why->first;
  EXPECT_NE(why->first.find("--generator llm"), std::string::npos) << why->first;
  EXPECT_NE(why->second.find("  softmax: closest differs at 1e-3\n"), std::string::npos)
      << why->second;
}

TEST_F(SuiteProblemsTest, ServedTasksProblemFilesAndUnreadableTomlAreLeftToTheChild) {
  const auto settled = prepare(derived_task(problem().string(), "rows"));
  EXPECT_FALSE(unserved_reason(settled.at("p").toml_path).has_value());  // family softmax
  EXPECT_FALSE(unserved_reason(problem()).has_value());                  // the child derives
  std::ofstream(dir_ / "bad.toml") << "name = \n";
  EXPECT_FALSE(unserved_reason(dir_ / "bad.toml").has_value());
}

TEST(SuiteGenerator, ArgumentsWinOverTheEnvironmentWhichWinsOverTemplates) {
  ::unsetenv("KFORGE_GENERATOR");
  EXPECT_EQ(suite_generator({"--steps", "1"}), "templates");
  EXPECT_EQ(suite_generator({"--generator", "llm"}), "llm");
  EXPECT_EQ(suite_generator({"--generator=llm", "--steps", "2"}), "llm");
  ::setenv("KFORGE_GENERATOR", "llm", 1);
  EXPECT_EQ(suite_generator({}), "llm");
  EXPECT_EQ(suite_generator({"--generator", "templates"}), "templates");
  ::unsetenv("KFORGE_GENERATOR");
}

TEST(ReferenceCheckArgs, RunTheReferenceWhereTheOptimizeChildrenWouldRunIt) {
  for (const char* name : {"KFORGE_BACKEND", "KFORGE_BASELINE", "KFORGE_DEVICE", "KFORGE_DEVICES"}) {
    ::unsetenv(name);
  }
  using Args = std::vector<std::string>;
  EXPECT_EQ(reference_check_args({"--steps", "1"}),
            (Args{"--backend", "auto", "--baseline", "eager"}));
  EXPECT_EQ(reference_check_args({"--backend", "cuda", "--baseline=compile", "--device", "3"}),
            (Args{"--backend", "cuda", "--baseline", "compile", "--device", "3"}));
  // The reference of a run with several devices goes to the first.
  EXPECT_EQ(reference_check_args({"--devices", "2,5,6", "--backend", "cuda"}),
            (Args{"--backend", "cuda", "--baseline", "eager", "--device", "2"}));
  ::setenv("KFORGE_BACKEND", "cpu", 1);
  ::setenv("KFORGE_DEVICE", "1", 1);
  EXPECT_EQ(reference_check_args({}),
            (Args{"--backend", "cpu", "--baseline", "eager", "--device", "1"}));
  // The last value given wins, as in CLI11's parse of the child's arguments.
  EXPECT_EQ(forwarded_value({"--backend", "cpu", "--backend", "cuda"}, "--backend",
                            "KFORGE_BACKEND", "auto"),
            "cuda");
  ::unsetenv("KFORGE_BACKEND");
  ::unsetenv("KFORGE_DEVICE");
}

}  // namespace
}  // namespace kforge::cli
