// The mapping of a PyTorch task's signature onto its module, as the model is shown it: every
// kforge_run argument with its place in the module and the origin of its values, scalars with
// their values, a signature shape that is a view of the module's, and nothing for a native task.
#include "llm/torch_prompt.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/files.h"
#include "task/task_loader.h"
#include "task/torch_task.h"

namespace kforge::llm {
namespace {
namespace fs = std::filesystem;

nlohmann::json derived_linear_relu() {
  return nlohmann::json::parse(
      read_file(fs::path(KFORGE_SOURCE_DIR) / "tests/data/linear_relu_half/derived.json"));
}

TEST(TorchPromptTest, EveryArgumentSaysWhereItLivesAndWhereItsValuesComeFrom) {
  const Task task = task_from_derived(derived_linear_relu(), "linear_relu_half.py");
  const std::string text = describe_torch_mapping(task);
  for (const std::string& expected :
       {std::string("- `args->inputs[0]` = `x`: f32 [batch_size, in_features]; argument 0 of "
                    "`forward` (element 0 of `get_inputs()`); values made by kforge's generator"),
        std::string("- `args->inputs[2]` = `linear_bias`: f32 [out_features]; the module's "
                    "parameter `linear.bias` (`named_parameters()`)"),
        std::string("- `args->outputs[0]` = `out`: f32 [batch_size, out_features]; what `forward` "
                    "returns"),
        std::string("'gate_tail' rebinds batch_size=3, in_features=4097, out_features=5"),
        std::string("'problem' uses the file's own values"),
        std::string("the module's in float64")}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing: " << expected << "\n" << text;
  }
  EXPECT_EQ(text.find("holds it as"), std::string::npos) << text;  // no view here
}

TEST(TorchPromptTest, ScalarsProblemMadeInputsAndViewsAreSaid) {
  nlohmann::json derived = derived_linear_relu();
  // forward(x, s) with s = 0.5 from get_inputs(); x made by the problem; the module holds x as
  // [batch_size, 3, 64] while the signature sees [batch_size, in_features] (192 = 3 x 64).
  derived["signature"]["scalars"] = {{{"name", "s"}, {"dtype", "f64"}, {"value", 0.5}}};
  derived["torch"]["scalars"] = {{{"source", "input"}, {"index", 1}}};
  derived["torch"]["workloads"]["problem"]["shapes"][0] = {48, 3, 64};
  derived["input_rules"][0] = {{"tensor", "x"}, {"rule", "problem"}, {"why", "a boolean mask"}};
  derived["torch"]["double_reference"] = false;
  Task task = task_from_derived(derived, "linear_relu_half.py");
  const std::string text = describe_torch_mapping(task);
  EXPECT_NE(text.find("- `args->scalars[0]` = `s` = 0.5 (f64, passed as double); argument 1 of "
                      "`forward`"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("values from the problem's own `get_inputs()` / `Model()` under kforge's "
                      "seed (a boolean mask)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("the module holds it as [48, 3, 64] at workload 'problem'"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("float64"), std::string::npos) << text;
}

// A family's task: its signature scalar (eps) is a module attribute, found by name among
// torch.scalars, after forward's own scalar argument (which carries its value and no name).
TEST(TorchPromptTest, ScalarsAreFoundByNameNotByPosition) {
  nlohmann::json derived = derived_linear_relu();
  derived["signature"]["scalars"] = {{{"name", "eps"}, {"dtype", "f64"}, {"value", 1e-5}}};
  derived["torch"]["scalars"] = {
      {{"source", "input"}, {"index", 1}, {"value", 0.5}, {"dtype", "f64"}},
      {{"source", "attribute"}, {"name", "eps"}, {"attribute", "norm.eps"}}};
  Task task = task_from_derived(derived, "linear_relu_half.py");
  const std::string text = describe_torch_mapping(task);
  EXPECT_NE(text.find("= `eps` = 1e-05 (f64, passed as double); the module's attribute "
                      "`norm.eps`"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("argument 1 of `forward`"), std::string::npos) << text;
}

TEST(TorchPromptTest, ANativeTaskHasNoMapping) {
  const Task task =
      load_task((fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml").string());
  EXPECT_EQ(describe_torch_mapping(task), "");
}

}  // namespace
}  // namespace kforge::llm
