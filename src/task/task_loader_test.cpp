#include "task/task_loader.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/error.h"
#include "core/expression.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

const char* kValidTask = R"(
name = "scale"
family = "scale"
flops = "rows*cols"
[[inputs]]
name = "x"
dtype = "f32"
shape = ["rows", "cols"]
[[outputs]]
name = "y"
dtype = "f32"
shape = ["rows", "cols"]
[[scalars]]
name = "alpha"
dtype = "f32"
value = 2.0
[tolerance]
rtol = 1e-5
atol = 1e-6
[[workloads]]
name = "small"
rows = 4
cols = 33
[[workloads]]
name = "big"
rows = 1024
cols = 1024
[reference]
cpu = "ref.cpp"
)";

class TaskLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_task_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "ref.cpp") << "// reference\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& text) {
    fs::path path = dir_ / "task.toml";
    std::ofstream(path) << text;
    return path.string();
  }

  // Loads `text` and returns the error message (empty if it loaded).
  std::string error_of(const std::string& text) {
    try {
      load_task(write(text));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  static std::string replace(std::string text, const std::string& from, const std::string& to) {
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  }

  fs::path dir_;
};

TEST_F(TaskLoaderTest, LoadsAValidTask) {
  Task task = load_task(write(kValidTask));
  EXPECT_EQ(task.name, "scale");
  ASSERT_EQ(task.signature.tensors.size(), 2u);
  EXPECT_EQ(task.signature.tensors[1].role, TensorRole::output);
  EXPECT_DOUBLE_EQ(task.signature.scalars[0].value, 2.0);
  ASSERT_EQ(task.workloads.size(), 2u);
  // No workload marked timed: the one moving the most bytes is.
  EXPECT_FALSE(task.workloads[0].timed);
  EXPECT_TRUE(task.workloads[1].timed);
  EXPECT_EQ(min_bytes_moved(task.signature, task.workloads[1]), 2 * 1024 * 1024 * 4);
  EXPECT_DOUBLE_EQ(*flops_per_call(task, task.workloads[1]), 1024.0 * 1024.0);
  EXPECT_TRUE(fs::exists(task.reference_paths.at("cpu")));
}

TEST_F(TaskLoaderTest, MissingFieldNamesFileAndField) {
  std::string message = error_of(replace(kValidTask, "family = \"scale\"", ""));
  EXPECT_NE(message.find("task.toml: family: missing"), std::string::npos) << message;
}

TEST_F(TaskLoaderTest, WrongDtypeSaysWhatIsExpected) {
  std::string message = error_of(replace(kValidTask, "dtype = \"f32\"", "dtype = \"float\""));
  EXPECT_NE(message.find("inputs[0].dtype"), std::string::npos) << message;
  EXPECT_NE(message.find("f32, f64"), std::string::npos) << message;
}

TEST_F(TaskLoaderTest, ShapeThatDoesNotBind) {
  std::string message = error_of(replace(kValidTask, "rows = 4\n", ""));
  EXPECT_NE(message.find("workloads[0]"), std::string::npos) << message;
  EXPECT_NE(message.find("'rows' is not bound"), std::string::npos) << message;
}

TEST_F(TaskLoaderTest, NonPositiveDimension) {
  std::string message = error_of(replace(kValidTask, "cols = 33", "cols = 0"));
  EXPECT_NE(message.find("workloads[0].cols"), std::string::npos) << message;
}

TEST_F(TaskLoaderTest, MissingReferenceFile) {
  std::string message = error_of(replace(kValidTask, "cpu = \"ref.cpp\"", "cpu = \"nope.cpp\""));
  EXPECT_NE(message.find("reference.cpu"), std::string::npos) << message;
  EXPECT_NE(message.find("does not exist"), std::string::npos) << message;
}

TEST_F(TaskLoaderTest, UnknownReferenceBackend) {
  std::string message = error_of(replace(kValidTask, "cpu = \"ref.cpp\"", "tpu = \"ref.cpp\""));
  EXPECT_NE(message.find("reference.tpu: unknown reference (expected cpu, cuda or torch"), std::string::npos) << message;
}

TEST_F(TaskLoaderTest, InvalidTomlGivesLineAndColumn) {
  std::string message = error_of("name = \"x\"\nfamily = \n");
  EXPECT_NE(message.find("task.toml:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("not valid TOML"), std::string::npos) << message;
}

TEST_F(TaskLoaderTest, DuplicateTensorNames) {
  std::string message = error_of(replace(kValidTask, "name = \"y\"", "name = \"x\""));
  EXPECT_NE(message.find("duplicate name 'x'"), std::string::npos) << message;
}

TEST_F(TaskLoaderTest, NegativeTolerance) {
  std::string message = error_of(replace(kValidTask, "rtol = 1e-5", "rtol = -1.0"));
  EXPECT_NE(message.find("tolerance.rtol"), std::string::npos) << message;
}

TEST_F(TaskLoaderTest, AWorkloadsOwnAtolReplacesTheTasksThereOnly) {
  const Task task =
      load_task(write(replace(kValidTask, "atol = 1e-6", "atol = 1e-6\nworkload_atol = { big = 0.5 }")));
  EXPECT_DOUBLE_EQ(task.tolerance.atol_for("big"), 0.5);
  EXPECT_DOUBLE_EQ(task.tolerance.atol_for("small"), 1e-6);
  const std::string unknown = error_of(
      replace(kValidTask, "atol = 1e-6", "atol = 1e-6\nworkload_atol = { huge = 0.5 }"));
  EXPECT_NE(unknown.find("tolerance.workload_atol.huge: no workload of that name"),
            std::string::npos) << unknown;
  const std::string negative = error_of(
      replace(kValidTask, "atol = 1e-6", "atol = 1e-6\nworkload_atol = { big = -1 }"));
  EXPECT_NE(negative.find("tolerance.workload_atol.big"), std::string::npos) << negative;
}

TEST_F(TaskLoaderTest, MissingFileIsAnError) {
  EXPECT_THROW(load_task((dir_ / "absent.toml").string()), Error);
}

TEST_F(TaskLoaderTest, BadFlopsFormula) {
  std::string message = error_of(replace(kValidTask, "rows*cols", "rows*depth"));
  EXPECT_NE(message.find("flops"), std::string::npos) << message;
  EXPECT_NE(message.find("'depth'"), std::string::npos) << message;
}

TEST_F(TaskLoaderTest, EvaluationFieldsLoadAndAreValidated) {
  Task task = load_task(write(kValidTask));
  EXPECT_EQ(task.distributions, (std::vector<std::string>{"uniform", "normal", "heavy_tailed"}));
  EXPECT_FALSE(task.tolerance.normalized);
  EXPECT_FALSE(task.signature.tensors[0].strided);

  std::string text = replace(kValidTask, "atol = 1e-6", "atol = 1e-6\nnormalized = 1e-5");
  text = replace(text, "flops = \"rows*cols\"",
                 "flops = \"rows*cols\"\nbytes = \"4*rows*cols\"\n"
                 "distributions = [\"uniform\", \"normal\", \"small\"]");
  text = replace(text, "shape = [\"rows\", \"cols\"]\n[[outputs]]",
                 "shape = [\"rows\", \"cols\"]\nstrided = true\n[[outputs]]");
  text += "[policy]\nallow = [\"library_compute\"]\n";
  task = load_task(write(text));
  EXPECT_EQ(*task.tolerance.normalized, 1e-5);
  EXPECT_EQ(task.distributions, (std::vector<std::string>{"uniform", "normal", "small"}));
  EXPECT_EQ(bytes_per_call(task, task.workloads[1]), 4 * 1024 * 1024);
  EXPECT_TRUE(task.signature.tensors[0].strided);
  EXPECT_FALSE(task.source_policy.enabled.contains(PolicyCategory::library_compute));

  EXPECT_NE(error_of(replace(kValidTask, "atol = 1e-6", "atol = 1e-6\nnormalized = -1"))
                .find("tolerance.normalized"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kValidTask, "atol = 1e-6", "atol = 1e-6\nrelative = 1"))
                .find("tolerance.relative: unknown key"),
            std::string::npos);
  const std::string unknown = error_of(
      replace(kValidTask, "flops = \"rows*cols\"", "distributions = [\"cauchy\"]"));
  EXPECT_NE(unknown.find("distributions"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("\"pareto\", \"spike\""), std::string::npos) << unknown;
  // The adversarial distributions may be listed like any other.
  task = load_task(write(replace(kValidTask, "flops = \"rows*cols\"",
                                 "flops = \"rows*cols\"\n"
                                 "distributions = [\"pareto\", \"spike\"]")));
  EXPECT_EQ(task.distributions, (std::vector<std::string>{"pareto", "spike"}));
  EXPECT_NE(error_of(replace(kValidTask, "shape = [\"rows\", \"cols\"]\n[[scalars]]",
                             "shape = [\"rows\", \"cols\"]\nstrided = true\n[[scalars]]"))
                .find("only inputs may be strided"),
            std::string::npos);
  EXPECT_NE(error_of(kValidTask + std::string("[policy]\nallow = [\"threads\"]\n"))
                .find("policy.allow"),
            std::string::npos);
}

TEST_F(TaskLoaderTest, AMisspeltTopLevelKeyOrTableIsRefused) {
  // `distribution` for `distributions`: without the check its default would be used silently.
  std::string message = error_of("distribution = [\"small\"]\n" + std::string(kValidTask));
  EXPECT_NE(message.find("distribution: unknown top-level key or table (expected one of name,"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("distributions"), std::string::npos) << message;
  message = error_of(std::string(kValidTask) + "[extras]\nx = 1\n");
  EXPECT_NE(message.find("extras: unknown top-level key or table"), std::string::npos) << message;
}

TEST_F(TaskLoaderTest, AKeyBelowATableHeaderThatBelongsAtTheTopIsRefused) {
  // In TOML a key written below [[scalars]] belongs to that scalar; kforge must not ignore it.
  std::string text = replace(kValidTask, "shape = [\"rows\", \"cols\"]\n[[outputs]]",
                             "shape = [\"rows\", \"cols\"]\ndistributions = [\"normal\"]\n"
                             "[[outputs]]");
  const std::string message = error_of(text);
  EXPECT_NE(message.find("inputs[0].distributions: unknown key"), std::string::npos) << message;
  EXPECT_NE(message.find("move it above the first [[...]] header"), std::string::npos) << message;
}

TEST_F(TaskLoaderTest, ProvidedInputsNeedATorchReferenceAndBoolIsADtype) {
  // A native reference cannot make a problem's own values: provided inputs are refused there.
  const std::string message = error_of(replace(
      kValidTask, "shape = [\"rows\", \"cols\"]\n[[outputs]]",
      "shape = [\"rows\", \"cols\"]\nprovided = true\n[[outputs]]"));
  EXPECT_NE(message.find("inputs.x.provided: provided inputs need a PyTorch reference"),
            std::string::npos)
      << message;
  EXPECT_NE(error_of(replace(kValidTask, "shape = [\"rows\", \"cols\"]\n[[scalars]]",
                             "shape = [\"rows\", \"cols\"]\nprovided = true\n[[scalars]]"))
                .find("only inputs may be provided"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kValidTask, "shape = [\"rows\", \"cols\"]\n[[outputs]]",
                             "shape = [\"rows\", \"cols\"]\nprovided = 1\n[[outputs]]"))
                .find("inputs[0].provided: expected true or false"),
            std::string::npos);
  const Task task = load_task(write(replace(kValidTask, "dtype = \"f32\"", "dtype = \"bool\"")));
  EXPECT_EQ(task.signature.tensors[0].dtype, DType::b8);
  EXPECT_EQ(to_string(DType::b8), "bool");
  EXPECT_EQ(dtype_size(DType::b8), 1);
  EXPECT_FALSE(is_floating(DType::b8));
  EXPECT_TRUE(is_floating(DType::bf16));
}

TEST(Task, ProvidedTravelsThroughJsonAndIsLeftOutWhenFalse) {
  TensorSpec spec{"mask", TensorRole::input, DType::b8, {"rows"}};
  EXPECT_FALSE(nlohmann::json(spec).contains("provided"));
  spec.provided = true;
  const nlohmann::json j = spec;
  EXPECT_TRUE(j.at("provided").get<bool>());
  EXPECT_TRUE(j.get<TensorSpec>().provided);
  EXPECT_EQ(j.get<TensorSpec>().dtype, DType::b8);
}

TEST(Expression, EvaluatesArithmeticOverDims) {
  std::map<std::string, int64_t> dims = {{"rows", 8}, {"cols", 4}};
  EXPECT_DOUBLE_EQ(evaluate_expression("2*rows*cols + rows", dims), 72.0);
  EXPECT_DOUBLE_EQ(evaluate_expression("(rows - 2) / 3", dims), 2.0);
  EXPECT_DOUBLE_EQ(evaluate_expression("-rows + 1e1", dims), 2.0);
  EXPECT_THROW(evaluate_expression("rows *", dims), Error);
  EXPECT_THROW(evaluate_expression("rows ) ", dims), Error);
}

TEST(Task, BundledExamplesLoad) {
  for (const char* name :
       {"rmsnorm", "softmax", "gemv", "gemv_t", "log_softmax", "layernorm", "rmsnorm_channels",
        "relu", "gelu", "silu"}) {
    fs::path path = fs::path(KFORGE_SOURCE_DIR) / "examples" / name / "task.toml";
    Task task = load_task(path.string());
    EXPECT_EQ(task.family, name);
    EXPECT_TRUE(task.reference_paths.count("cpu")) << name;
    EXPECT_TRUE(task.reference_paths.count("cuda")) << name;
    bool has_tail = false;
    for (const Workload& w : task.workloads) {
      for (const auto& [dim, value] : w.dims) has_tail = has_tail || value % 32 != 0;
    }
    EXPECT_TRUE(has_tail) << name << " needs a workload with a size that is not a multiple of 32";
  }
}

// Every task folder shipped in the repository (examples/ and bench/tasks/, the KernelBench-sized
// ones) loads, has a cuda reference that exists, a timed workload and a tail-sized gate
// workload: a broken bench task would otherwise surface only on the GPU machine.
TEST(Task, EveryShippedTaskLoads) {
  int loaded = 0;
  for (const char* folder : {"examples", "bench/tasks"}) {
    for (const auto& entry : fs::directory_iterator(fs::path(KFORGE_SOURCE_DIR) / folder)) {
      const fs::path path = entry.path() / "task.toml";
      if (!fs::exists(path)) continue;
      SCOPED_TRACE(path.string());
      Task task = load_task(path.string());
      ++loaded;
      ASSERT_TRUE(task.reference_paths.count("cuda"));
      EXPECT_TRUE(fs::exists(task.reference_paths.at("cuda")));
      int timed = 0;
      bool has_tail = false;
      for (const Workload& w : task.workloads) {
        timed += w.timed ? 1 : 0;
        for (const auto& [dim, value] : w.dims) has_tail = has_tail || value % 32 != 0;
      }
      EXPECT_GE(timed, 1);
      EXPECT_TRUE(has_tail);
    }
  }
  EXPECT_GE(loaded, 20);
}

}  // namespace
}  // namespace kforge
