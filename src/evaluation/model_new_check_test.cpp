#include "evaluation/model_new_check.h"

#include <gtest/gtest.h>

namespace kforge::evaluation {
namespace {

const char kProblem[] = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(linear(x)) / 2"""

    def __init__(self, in_features: int,
                 out_features=8):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x)) / 2
)";

TEST(ModelNewCheckTest, ReadsAClassesBasesAndConstructorAcrossLines) {
  const PythonClassShape model = python_class_shape(kProblem, "Model");
  ASSERT_TRUE(model.found);
  EXPECT_EQ(model.bases, "nn.Module");
  ASSERT_TRUE(model.has_init);
  EXPECT_EQ(model.init_parameters, (std::vector<std::string>{"in_features", "out_features"}));
  EXPECT_EQ(model.init_text, "(self, in_features: int, out_features=8)");
  EXPECT_FALSE(python_class_shape(kProblem, "ModelNew").found);
}

TEST(ModelNewCheckTest, AModelNewWithModelsConstructorPasses) {
  const char candidate[] = R"(import torch
class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features=8, *, _unused=None) -> None:
        super().__init__()
)";
  // Keyword-only parameters have names too: inspect.signature lists them, so they differ.
  EXPECT_NE(check_model_new_signature(candidate, kProblem), "");
  const char same[] = R"(class ModelNew(nn.Module):
    # the same arguments, annotated differently
    def __init__(self, in_features: int, out_features: int = 8):
        super().__init__()
)";
  EXPECT_EQ(check_model_new_signature(same, kProblem), "");
}

TEST(ModelNewCheckTest, AnotherConstructorIsNamedBesideModels) {
  const char candidate[] = R"(class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
)";
  EXPECT_EQ(check_model_new_signature(candidate, kProblem),
            "ModelNew.__init__(self, features) differs from Model.__init__(self, in_features: int, "
            "out_features=8): ModelNew must take the same constructor arguments, in the same "
            "order (it is built as ModelNew(*get_init_inputs()), like Model), and create the "
            "same parameters");
}

TEST(ModelNewCheckTest, NoModelNewAtAllSaysWhatIsExpected) {
  const std::string message = check_model_new_signature("import torch\nclass Fast(nn.Module):\n"
                                                        "    pass\n", kProblem);
  EXPECT_NE(message.find("the candidate defines no ModelNew"), std::string::npos) << message;
  EXPECT_NE(message.find("Model.__init__(self, in_features: int, out_features=8)"),
            std::string::npos)
      << message;
  // A nested class of that name is not the module's ModelNew.
  EXPECT_NE(check_model_new_signature("def f():\n    class ModelNew:\n        pass\n", kProblem),
            "");
}

TEST(ModelNewCheckTest, AModelNewWithoutItsOwnInitIsReportedOnlyOverAPlainModule) {
  EXPECT_NE(check_model_new_signature("class ModelNew(nn.Module):\n    def forward(self, x):\n"
                                      "        return x\n",
                                      kProblem)
                .find("ModelNew defines no __init__"),
            std::string::npos);
  // Its __init__ may come from a base of its own: the worker decides.
  EXPECT_EQ(check_model_new_signature("class Base(nn.Module):\n    def __init__(self, a, b):\n"
                                      "        super().__init__()\nclass ModelNew(Base):\n"
                                      "    pass\n",
                                      kProblem),
            "");
}

TEST(ModelNewCheckTest, WhatCannotBeReadStaticallyIsLeftToTheWorker) {
  EXPECT_EQ(check_model_new_signature("from fast import ModelNew\n", kProblem), "");
  EXPECT_EQ(check_model_new_signature("ModelNew = make_model()\n", kProblem), "");
  // A problem without its own __init__ gives nothing to compare with.
  EXPECT_EQ(check_model_new_signature("class ModelNew(nn.Module):\n    def __init__(self, x):\n"
                                      "        super().__init__()\n",
                                      "class Model(nn.Module):\n    def forward(self, x):\n"
                                      "        return x\n"),
            "");
}

}  // namespace
}  // namespace kforge::evaluation
