// The task file's precision, [fp32_model] and epilogue keys (task.h), and the epilogue define.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/error.h"
#include "core/epilogue.h"
#include "task/task_loader.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

// A gemm_epilogue task; `{HEAD}` is replaced by top-level keys, `{TAIL}` by tables at the end.
const char* kGemmTask = R"(
name = "g"
family = "gemm_epilogue"
{HEAD}
[[inputs]]
name = "x"
dtype = "f32"
shape = ["M", "K"]

[[inputs]]
name = "weight"
dtype = "f32"
shape = ["N", "K"]

[[outputs]]
name = "y"
dtype = "f32"
shape = ["M", "N"]

[[scalars]]
name = "divisor"
dtype = "f32"
value = 2.0

[[scalars]]
name = "lo"
dtype = "f32"
value = -1.0

[[scalars]]
name = "hi"
dtype = "f32"
value = 1.0

[tolerance]
rtol = 1e-4
atol = 1e-4

[[workloads]]
name = "w"
M = 3
K = 5
N = 7

[reference]
cpu = "ref.cpp"
{TAIL}
)";

class TaskPrecisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_precision_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "ref.cpp") << "// reference\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  Task load(const std::string& head, const std::string& tail = "") {
    std::string text = kGemmTask;
    text.replace(text.find("{HEAD}"), 6, head);
    text.replace(text.find("{TAIL}"), 6, tail);
    const fs::path path = dir_ / "task.toml";
    std::ofstream(path) << text;
    return load_task(path.string());
  }

  std::string error_of(const std::string& head, const std::string& tail = "") {
    try {
      load(head, tail);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(TaskPrecisionTest, DefaultsToFp32WithoutAModelOrChain) {
  const Task task = load("");
  EXPECT_EQ(task.precision, "fp32");
  EXPECT_TRUE(task.fp32_model_defines.empty());
  EXPECT_TRUE(task.epilogue.empty());
  EXPECT_TRUE(task_defines(task).empty());
}

TEST_F(TaskPrecisionTest, ReadsPrecisionModelAndChain) {
  const Task task = load("precision = \"fp32\"\nepilogue = [\"relu\", \"div:divisor\", \"clamp:lo:hi\"]",
                         "[fp32_model]\ndefines = { KF_ACC = \"float\" }\nmax_ratio = 16.0\n");
  EXPECT_EQ(task.fp32_model_defines.at("KF_ACC"), "float");
  EXPECT_DOUBLE_EQ(task.precision_max_ratio, 16.0);
  ASSERT_EQ(task.epilogue.size(), 3u);
  // Scalar indices follow the signature's order; clamp is two ops; no comma anywhere.
  EXPECT_EQ(task_defines(task).at("KF_EPILOGUE"),
            "kf::ep::Relu{}|kf::ep::Div{0}|kf::ep::ClampMin{1}|kf::ep::ClampMax{2}");
}

TEST_F(TaskPrecisionTest, AcceptsTf32AndBf16AndRejectsOtherPrecisions) {
  EXPECT_EQ(load("precision = \"tf32\"").precision, "tf32");
  EXPECT_EQ(load("precision = \"bf16\"").precision, "bf16");
  const std::string message = error_of("precision = \"fp16\"");
  EXPECT_NE(message.find("precision"), std::string::npos) << message;
  EXPECT_NE(message.find("\"fp32\", \"tf32\" or \"bf16\""), std::string::npos) << message;
}

TEST_F(TaskPrecisionTest, RejectsMalformedFp32Models) {
  EXPECT_NE(error_of("", "[fp32_model]\nmax_ratio = 8.0\n").find("missing `defines`"),
            std::string::npos);
  EXPECT_NE(error_of("", "[fp32_model]\ndefines = { KF_ACC = 1 }\n").find("expected a string"),
            std::string::npos);
  EXPECT_NE(error_of("", "[fp32_model]\ndefines = { KF_ACC = \"float\" }\nmax_ratio = 0.5\n")
                .find(">= 1"),
            std::string::npos);
  EXPECT_NE(error_of("", "[fp32_model]\ndefine = { KF_ACC = \"float\" }\n").find("unknown key"),
            std::string::npos);
}

TEST_F(TaskPrecisionTest, EpilogueErrorsNameTheEntryAndWhatIsExpected) {
  std::string message = error_of("epilogue = [\"relu\", \"softsign\"]");
  EXPECT_NE(message.find("epilogue[1] 'softsign': unknown op"), std::string::npos) << message;
  EXPECT_NE(message.find("leaky_relu:scalar"), std::string::npos) << message;
  message = error_of("epilogue = [\"div\"]");
  EXPECT_NE(message.find("takes 1 scalar name"), std::string::npos) << message;
  message = error_of("epilogue = [\"mul:scale\"]");
  EXPECT_NE(message.find("no scalar named 'scale'"), std::string::npos) << message;
  message = error_of("epilogue = [\"relu:divisor\"]");
  EXPECT_NE(message.find("takes 0 scalar names"), std::string::npos) << message;
  message = error_of("epilogue = \"relu\"");
  EXPECT_NE(message.find("expected an array of op strings"), std::string::npos) << message;
}

// kernels/common/epilogue.h hands a kernel 24 scalars: a transposed convolution's ten geometry
// scalars and up to 14 of its chain.
TEST(EpilogueDefine, AChainNeedsAtMostTwentyFourScalars) {
  Signature signature;
  for (int i = 0; i < 25; ++i) signature.scalars.push_back({"s" + std::to_string(i), DType::f32, 1.0});
  EXPECT_THROW(parse_epilogue({"mul:s0"}, signature), Error);
  signature.scalars.pop_back();
  EXPECT_EQ(parse_epilogue({"mul:s23"}, signature).at(0).scalars.at(0), 23);
}

// A channel op reads an input tensor with one value per output channel ("x + self.bias" with a
// [C, 1, 1] parameter after a convolution); kernels find those tensors as their last inputs.
Signature channel_signature(const std::vector<std::string>& inputs) {
  Signature signature;
  for (const std::string& name : inputs) signature.tensors.push_back({name, TensorRole::input});
  signature.tensors.push_back({"y", TensorRole::output});
  signature.scalars.push_back({"divisor", DType::f32, 2.0});
  return signature;
}

// What parse_epilogue throws for `chain`, or "" when it parses.
std::string parse_error(const std::vector<std::string>& chain, const Signature& signature) {
  try {
    parse_epilogue(chain, signature);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(EpilogueDefine, ChannelOpsIndexTheLastInputsInTheOrderTheChainReadsThem) {
  const Signature signature = channel_signature({"x", "weight", "bias", "shift", "scale"});
  const std::vector<EpilogueOp> ops = parse_epilogue(
      {"relu", "add_channel:shift", "mul_channel:scale", "div:divisor", "sub_channel:shift"},
      signature);
  EXPECT_EQ(epilogue_define(ops),
            "kf::ep::Relu{}|kf::ep::AddChannel{0}|kf::ep::MulChannel{1}|kf::ep::Div{0}|"
            "kf::ep::SubChannel{0}");
  EXPECT_EQ(channel_tensor_count(ops), 2);
  EXPECT_EQ(channel_tensor_count(parse_epilogue({"relu"}, signature)), 0);
}

TEST(EpilogueDefine, ChannelOpErrorsNameTheTensorAndWhereItMustBe) {
  const Signature signature = channel_signature({"x", "weight", "shift", "scale"});
  auto message = [&](const std::vector<std::string>& chain) {
    return parse_error(chain, signature);
  };
  // Not the last inputs, or not in the order of first use.
  EXPECT_NE(message({"add_channel:shift"}).find("must be the signature's last inputs"),
            std::string::npos);
  EXPECT_NE(message({"mul_channel:scale", "add_channel:shift"}).find("last inputs"),
            std::string::npos);
  EXPECT_EQ(message({"add_channel:shift", "mul_channel:scale"}), "");
  EXPECT_NE(message({"add_channel:bias"}).find("no input tensor named 'bias'"), std::string::npos);
  EXPECT_NE(message({"add_channel:y"}).find("no input tensor named 'y'"), std::string::npos);
  EXPECT_NE(message({"add_channel"}).find("takes 1 tensor name"), std::string::npos);
  EXPECT_NE(message({"add_channel:shift:scale"}).find("takes 1 tensor name"), std::string::npos);
}

TEST_F(TaskPrecisionTest, AChainWithAChannelTensorDefinesHowManyKernelsRead) {
  std::string head = "epilogue = [\"add_channel:weight\", \"relu\"]";
  const Task task = load(head);
  EXPECT_EQ(task_defines(task).at("KF_EPILOGUE"), "kf::ep::AddChannel{0}|kf::ep::Relu{}");
  EXPECT_EQ(task_defines(task).at("KF_EPILOGUE_TENSORS"), "1");
  EXPECT_NE(error_of("epilogue = [\"add_channel:x\"]").find("last inputs"), std::string::npos);
}

// A branch op combines the value with a chain of it (x * torch.sigmoid(x)); its chain's scalars
// and channel tensors count where the branch stands.
TEST(EpilogueDefine, BranchOpsNestAChainAndItsOperands) {
  const Signature signature = channel_signature({"x", "weight", "shift", "scale"});
  const std::vector<EpilogueOp> ops = parse_epilogue(
      {"mul_branch(add_channel:shift,sigmoid)", "rsub_branch(mul_channel:scale,add_branch(tanh))",
       "div:divisor"},
      signature);
  EXPECT_EQ(epilogue_define(ops),
            "kf::ep::MulBranch{kf::ep::AddChannel{0}|kf::ep::Sigmoid{}}|"
            "kf::ep::RsubBranch{kf::ep::MulChannel{1}|kf::ep::AddBranch{kf::ep::Tanh{}}}|"
            "kf::ep::Div{0}");
  EXPECT_EQ(channel_tensor_count(ops), 2);
  auto message = [&](const std::vector<std::string>& chain) {
    return parse_error(chain, signature);
  };
  EXPECT_NE(message({"mul_branch"}).find("takes a chain in parentheses"), std::string::npos);
  EXPECT_NE(message({"mul_branch()"}).find("non-empty chain"), std::string::npos);
  EXPECT_NE(message({"relu(tanh)"}).find("only a branch op"), std::string::npos);
  EXPECT_NE(message({"mul_branch(softsign)"}).find("epilogue[0] 'mul_branch(softsign)' branch[0] "
                                                   "'softsign': unknown op"),
            std::string::npos)
      << message({"mul_branch(softsign)"});
  // A channel tensor first read inside a branch must still be among the last inputs, in order.
  EXPECT_NE(message({"mul_branch(mul_channel:scale)", "add_channel:shift"}).find("last inputs"),
            std::string::npos);
}

TEST(EpilogueDefine, EmptyChainIsTheIdentity) {
  EXPECT_EQ(epilogue_define({}), "kf::ep::Identity{}");
}

}  // namespace
}  // namespace kforge
