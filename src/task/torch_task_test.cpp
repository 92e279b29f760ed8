#include "task/torch_task.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include "common/error.h"
#include "task/task_loader.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// A derived task as python/kforge_torch/derive.py writes it (docs/torch_tasks.md): a 4-D module
// input seen as the softmax family's [rows, cols].
json softmax_derived(const std::string& problem) {
  return json::parse(R"json({
    "format": "kforge-torch-task", "version": 1, "name": "my_softmax",
    "description": "softmax over the last dimension", "problem": ")json" + problem + R"json(",
    "problem_sha256": "00ff", "family": "softmax",
    "family_match": {"family": "softmax", "adapter": "rows = prod(x.shape[:-1])", "checked": "2 x 2"},
    "signature": {"tensors": [
        {"name": "x", "role": "input", "dtype": "f32", "shape": ["rows", "cols"]},
        {"name": "y", "role": "output", "dtype": "f32", "shape": ["rows", "cols"]}],
      "scalars": []},
    "workloads": [
      {"name": "gate_small", "dims": {"rows": 6, "cols": 37}, "timed": false},
      {"name": "problem", "dims": {"rows": 64, "cols": 4096}, "timed": true}],
    "tolerance": {"rtol": 0.0001, "atol": 1e-06, "workload_atol": {"problem": 0.0003}},
    "distributions": ["uniform", "normal"],
    "flops": "5*rows*cols", "bytes": "",
    "torch": {
      "tensors": [{"source": "input", "index": 0}, {"source": "output", "index": 0}],
      "workloads": {
        "gate_small": {"constants": {"batch": 2, "dim": 37}, "shapes": [[2, 3, 37], [2, 3, 37]]},
        "problem": {"constants": {}, "shapes": [[16, 4, 4096], [16, 4, 4096]]}},
      "double_reference": true},
    "input_rules": [{"tensor": "x", "rule": "generated", "why": "a float input"}],
    "notes": ["a note"]
  })json");
}

class TorchTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_torch_task_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    problem_ = (dir_ / "my_softmax.py").string();
    std::ofstream(problem_) << "class Model: pass\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string problem_;
};

TEST_F(TorchTaskTest, DerivedJsonBecomesATaskWithTheModuleMapping) {
  const Task task = task_from_derived(softmax_derived(problem_), problem_);
  EXPECT_EQ(task.name, "my_softmax");
  EXPECT_EQ(task.family, "softmax");
  ASSERT_EQ(task.signature.tensors.size(), 2u);
  EXPECT_EQ(task.signature.tensors[1].role, TensorRole::output);
  EXPECT_TRUE(task.workloads[1].timed);
  EXPECT_EQ(task.distributions, (std::vector<std::string>{"uniform", "normal"}));
  EXPECT_TRUE(task.has_torch_reference());
  EXPECT_EQ(task.reference_paths.at("torch"), problem_);
  EXPECT_EQ(flops_per_call(task, task.workloads[1]).value(), 5.0 * 64 * 4096);
}

TEST_F(TorchTaskTest, MappingThatDisagreesWithTheSignatureIsRefusedNamingTheField) {
  json derived = softmax_derived(problem_);
  derived["torch"]["workloads"]["problem"]["shapes"][0] = {16, 4, 4095};
  try {
    task_from_derived(derived, problem_);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'x' has 262144 elements in the signature but "
                                         "262080 in the module"),
              std::string::npos)
        << e.what();
  }
  derived = softmax_derived(problem_);
  derived["torch"]["workloads"].erase("gate_small");
  EXPECT_THROW(task_from_derived(derived, problem_), Error);
  derived = softmax_derived(problem_);
  derived["torch"]["tensors"][1]["source"] = "input";
  EXPECT_THROW(task_from_derived(derived, problem_), Error);
  derived = softmax_derived(problem_);
  derived["version"] = 2;
  EXPECT_THROW(task_from_derived(derived, problem_), Error);
  // A hand-edited [torch] table: misspelt keys, a string for a flag, a workload the task lacks,
  // a negative argument position are each refused, naming the field.
  const std::vector<std::pair<std::function<void(json&)>, std::string>> edits = {
      {[](json& d) { d["torch"]["double_referenc"] = true; }, "torch.double_referenc: unknown key"},
      {[](json& d) { d["torch"]["double_reference"] = "yes"; }, "expected true or false"},
      {[](json& d) { d["torch"]["workloads"]["gone"] = d["torch"]["workloads"]["problem"]; },
       "torch.workloads.gone: not a workload of the task"},
      {[](json& d) { d["torch"]["tensors"][0]["index"] = -1; }, "torch.tensors[0].index"},
      {[](json& d) { d["torch"]["tensors"][0]["indx"] = 0; }, "torch.tensors[0].indx: unknown key"},
  };
  for (const auto& [edit, expected] : edits) {
    derived = softmax_derived(problem_);
    edit(derived);
    try {
      task_from_derived(derived, problem_);
      ADD_FAILURE() << "expected an error with " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

TEST_F(TorchTaskTest, TomlWrittenByKforgeTaskLoadsBackIntoTheSameTask) {
  const Task task = task_from_derived(softmax_derived(problem_), problem_);
  const fs::path toml_path = dir_ / "task.toml";
  std::ofstream(toml_path) << torch_task_toml(task, dir_.string());
  const Task loaded = load_task(toml_path.string());
  EXPECT_EQ(json(loaded.signature), json(task.signature));
  EXPECT_EQ(json(loaded.workloads), json(task.workloads));
  EXPECT_EQ(json(loaded.tolerance), json(task.tolerance));
  // The problem's own atol survives the TOML; the gate workloads keep the task's.
  EXPECT_DOUBLE_EQ(loaded.tolerance.atol_for("problem"), 0.0003);
  EXPECT_DOUBLE_EQ(loaded.tolerance.atol_for("gate_small"), 1e-6);
  EXPECT_EQ(loaded.family, "softmax");
  EXPECT_EQ(loaded.flops_formula, task.flops_formula);
  EXPECT_EQ(loaded.reference_paths.at("torch"), problem_);
  EXPECT_EQ(loaded.torch_reference.at("torch"), task.torch_reference.at("torch"));
  EXPECT_EQ(loaded.torch_reference.at("problem_sha256"), "00ff");
}

TEST_F(TorchTaskTest, TomlKeepsWhyNoFamilyMatchedAndWhereInputsComeFrom) {
  // `kforge optimize` of the TOML says why no family computes the module (the suite runs its
  // problems from such TOMLs): the reasons survive the round trip, quotes and newlines too.
  json derived = softmax_derived(problem_);
  derived["family"] = "";
  derived["family_misses"] = {{"softmax", "closest differs: \"x\" at 1e-3\nsecond line"},
                              {"layernorm", "needs gamma and beta"}};
  const Task task = task_from_derived(derived, problem_);
  const fs::path toml_path = dir_ / "task.toml";
  std::ofstream(toml_path) << torch_task_toml(task, "");
  const Task loaded = load_task(toml_path.string());
  EXPECT_EQ(loaded.family, "");
  EXPECT_EQ(loaded.torch_reference.at("family_misses"), derived["family_misses"]);
  EXPECT_FALSE(loaded.torch_reference.at("torch").contains("family_misses"));
  // Where each input's values come from, which the LLM prompt states, survives too.
  EXPECT_EQ(loaded.torch_reference.at("input_rules"), derived["input_rules"]);
  EXPECT_EQ(loaded.torch_reference.at("torch"), task.torch_reference.at("torch"));
}

TEST_F(TorchTaskTest, FamiliesThatMissedForTheSameReasonAreOneEntry) {
  json derived = softmax_derived(problem_);
  derived["family"] = "";
  derived["family_misses"] = {{"gelu", "the module returns 2 outputs; every family writes one"},
                              {"layernorm", "needs gamma and beta"},
                              {"relu", "the module returns 2 outputs; every family writes one"},
                              {"silu", "the module returns 2 outputs; every family writes one"}};
  const Task task = task_from_derived(derived, problem_);
  const std::vector<std::pair<std::string, std::string>> grouped = grouped_family_misses(task);
  ASSERT_EQ(grouped.size(), 2u);
  EXPECT_EQ(grouped[0].first, "gelu, relu, silu");
  EXPECT_EQ(grouped[0].second, "the module returns 2 outputs; every family writes one");
  EXPECT_EQ(grouped[1].first, "layernorm");
  EXPECT_EQ(family_misses(task).size(), 4u) << "the ungrouped list keeps every family";
}

TEST_F(TorchTaskTest, ZeroDimensionalOutputSurvivesTheToml) {
  // A loss (KernelBench 95) returns a 0-d tensor: shape [] in the derived task and in its TOML,
  // which a suite's child runs.
  json derived = softmax_derived(problem_);
  derived["signature"]["tensors"][1] = {{"name", "loss"}, {"role", "output"}, {"dtype", "f32"},
                                        {"shape", json::array()}};
  derived["torch"]["workloads"]["gate_small"]["shapes"][1] = json::array();
  derived["torch"]["workloads"]["problem"]["shapes"][1] = json::array();
  const Task task = task_from_derived(derived, problem_);
  const fs::path toml_path = dir_ / "task.toml";
  std::ofstream(toml_path) << torch_task_toml(task, "");
  const Task loaded = load_task(toml_path.string());
  EXPECT_EQ(json(loaded.signature), json(task.signature));
  EXPECT_TRUE(loaded.signature.tensors[1].shape.empty());
}

TEST_F(TorchTaskTest, TomlWithATorchReferenceButNoMappingSaysHowToWriteOne) {
  const Task task = task_from_derived(softmax_derived(problem_), problem_);
  std::string text = torch_task_toml(task, dir_.string());
  text = text.substr(0, text.find("\n[torch]"));
  const fs::path toml_path = dir_ / "task.toml";
  std::ofstream(toml_path) << text;
  try {
    load_task(toml_path.string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kforge task PROBLEM.py -o FILE"), std::string::npos)
        << e.what();
  }
}

TEST_F(TorchTaskTest, MissingProblemFileIsNamed) {
  try {
    load_task((dir_ / "absent.py").string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent.py: problem file does not exist"), std::string::npos)
        << e.what();
  }
}


// The environment of kforge's Python processes: bytecode goes to kforge's cache folder (a
// PyTorch without bytecode otherwise compiles ~1,000 modules at every start), unless the user
// chose a prefix or turned it off.
class TorchEnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* saved = std::getenv("KFORGE_PYCACHE");
    saved_ = saved ? std::optional<std::string>(saved) : std::nullopt;
  }
  void TearDown() override {
    if (saved_) {
      ::setenv("KFORGE_PYCACHE", saved_->c_str(), 1);
    } else {
      ::unsetenv("KFORGE_PYCACHE");
    }
  }
  static std::optional<std::string> value(const std::vector<std::string>& entries,
                                          const std::string& name) {
    for (const std::string& entry : entries) {
      if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
    }
    return std::nullopt;
  }
  std::optional<std::string> saved_;
};

TEST_F(TorchEnvironmentTest, BytecodeGoesToKforgesCacheEvenWhenTheHostSaysDoNotWriteIt) {
  ::setenv("KFORGE_PYCACHE", "/tmp/kforge-pycache-test", 1);
  const auto entries =
      torch_environment({"PATH=/usr/bin", "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH=/extra"});
  EXPECT_EQ(value(entries, "PYTHONPYCACHEPREFIX"), "/tmp/kforge-pycache-test");
  EXPECT_FALSE(value(entries, "PYTHONDONTWRITEBYTECODE"));
  EXPECT_EQ(value(entries, "PATH"), "/usr/bin");
  ASSERT_TRUE(value(entries, "PYTHONPATH"));
  EXPECT_NE(value(entries, "PYTHONPATH")->find(":/extra"), std::string::npos);
}

TEST_F(TorchEnvironmentTest, UsersOwnPrefixAndOffAreLeftAsTheyAre) {
  ::setenv("KFORGE_PYCACHE", "/tmp/kforge-pycache-test", 1);
  auto entries = torch_environment({"PYTHONPYCACHEPREFIX=/mine", "PYTHONDONTWRITEBYTECODE=1"});
  EXPECT_EQ(value(entries, "PYTHONPYCACHEPREFIX"), "/mine");
  EXPECT_EQ(value(entries, "PYTHONDONTWRITEBYTECODE"), "1");
  ::setenv("KFORGE_PYCACHE", "off", 1);
  EXPECT_EQ(python_bytecode_cache(), "");
  entries = torch_environment({"PYTHONDONTWRITEBYTECODE=1"});
  EXPECT_FALSE(value(entries, "PYTHONPYCACHEPREFIX"));
  EXPECT_EQ(value(entries, "PYTHONDONTWRITEBYTECODE"), "1");
}

TEST_F(TorchEnvironmentTest, DefaultFolderIsUnderTheUsersCache) {
  ::unsetenv("KFORGE_PYCACHE");
  const std::string folder = python_bytecode_cache();
  if (std::getenv("XDG_CACHE_HOME") == nullptr && std::getenv("HOME") == nullptr) {
    EXPECT_EQ(folder, "");
  } else {
    EXPECT_NE(folder.find("kforge"), std::string::npos) << folder;
    EXPECT_EQ(fs::path(folder).filename(), "pycache");
  }
}

// A suite hands its children the answer for the Python it asked; any other Python is asked.
TEST(TorchCompileSupport, AnAnswerHandedDownCountsOnlyForThePythonItWasFor) {
  ::unsetenv("KFORGE_TORCH_COMPILE_SUPPORT");
  EXPECT_FALSE(compile_support_handed_down("/usr/bin/python3"));
  ::setenv("KFORGE_TORCH_COMPILE_SUPPORT", "/usr/bin/python3", 1);
  EXPECT_TRUE(compile_support_handed_down("/usr/bin/python3"));
  EXPECT_FALSE(compile_support_handed_down("/opt/torch/bin/python3"));
  ::setenv("KFORGE_TORCH_COMPILE_SUPPORT", "", 1);
  EXPECT_FALSE(compile_support_handed_down(""));
  ::unsetenv("KFORGE_TORCH_COMPILE_SUPPORT");
}

}  // namespace
}  // namespace kforge
