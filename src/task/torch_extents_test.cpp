#include "task/torch_extents.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace kforge {
namespace {
using nlohmann::json;

// x [n, h], y [n, oh] with oh = 2 h - 1 (a stride-2 transposed convolution of a 2-tap kernel, no
// padding), at two workloads.
Task strided_task() {
  Task task;
  TensorSpec x;
  x.name = "x";
  x.shape = {"n", "h"};
  TensorSpec y;
  y.name = "y";
  y.role = TensorRole::output;
  y.shape = {"n", "oh"};
  task.signature.tensors = {x, y};
  Workload a;
  a.name = "gate";
  a.dims = {{"n", 2}, {"h", 5}, {"oh", 9}};
  Workload b;
  b.name = "problem";
  b.dims = {{"n", 8}, {"h", 64}, {"oh", 127}};
  task.workloads = {a, b};
  return task;
}

std::string failure(const json& extents) {
  try {
    validate_extents(strided_task(), extents, "task.toml: torch");
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(TorchExtents, ARuleThatHoldsAtEveryWorkloadPasses) {
  EXPECT_EQ(failure(json::parse(R"({"oh": {"const": -1, "terms": [[2, "h"]]}})")), "");
}

// A convolution's output extent floors: oh = floor((4 h - 1) / 2) is 9 at h = 5 (19 / 2 = 9.5) and
// 127 at h = 64, where rounding up or to nearest would give 10 and 128.
TEST(TorchExtents, ADivisorFloorsTheRule) {
  EXPECT_EQ(failure(json::parse(R"({"oh": {"const": -1, "terms": [[4, "h"]], "div": 2}})")), "");
  EXPECT_NE(failure(json::parse(R"({"oh": {"const": 1, "terms": [[4, "h"]], "div": 2}})"))
                .find("the rule gives 10 at workload 'gate'"),
            std::string::npos);
  EXPECT_NE(failure(json::parse(R"({"oh": {"const": -1, "terms": [[4, "h"]], "div": 0}})"))
                .find("div = <whole number >= 1"),
            std::string::npos);
  EXPECT_NE(failure(json::parse(R"({"oh": {"const": -1, "terms": [[4, "h"]], "step": 2}})"))
                .find("expected {const"),
            std::string::npos);
}

TEST(TorchExtents, ARuleAWorkloadContradictsNamesIt) {
  const std::string why = failure(json::parse(R"({"oh": {"const": 0, "terms": [[2, "h"]]}})"));
  EXPECT_NE(why.find("task.toml: torch.extents.oh: the rule gives 10 at workload 'gate', which "
                     "binds oh = 9"),
            std::string::npos)
      << why;
}

TEST(TorchExtents, MalformedRulesSayWhatIsExpected) {
  EXPECT_NE(failure(json::parse(R"({"ow": {"const": 0, "terms": []}})")).find(
                "torch.extents.ow: not a symbol of the signature's shapes"),
            std::string::npos);
  EXPECT_NE(failure(json::parse(R"({"oh": {"const": 0.5, "terms": []}})")).find(
                "expected {const = <whole number>"),
            std::string::npos);
  EXPECT_NE(failure(json::parse(R"({"oh": {"const": 0, "terms": [["h", 2]]}})")).find(
                "expected [<whole number>, \"<symbol>\"] pairs"),
            std::string::npos);
  EXPECT_NE(failure(json::parse(R"({"oh": {"const": 0, "terms": [[1, "oh"]]}})")).find(
                "'oh' is itself computed"),
            std::string::npos);
  EXPECT_NE(failure(json::parse(R"([1, 2])")).find("torch.extents: expected a table"),
            std::string::npos);
}

}  // namespace
}  // namespace kforge
