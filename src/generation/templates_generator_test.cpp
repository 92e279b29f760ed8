#include "generation/templates_generator.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/error.h"
#include "compile/compiler.h"

namespace kforge::generation {
namespace {
namespace fs = std::filesystem;

class TemplatesGeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("kforge_gen_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "cpu" / "toy");
    std::ofstream(root_ / "cpu" / "toy" / "a.cpp") << "int a;\n";
    std::ofstream(root_ / "cpu" / "toy" / "b.cpp") << "int b;\n";
    std::ofstream(root_ / "cpu" / "toy" / "family.toml") << R"(
family = "toy"
backend = "cpu"
[[variants]]
name = "serial"
source = "a.cpp"
decomposition = "row_serial"
[variants.params]
ACCUMULATORS = [1, 2, 4, 8]
[[variants]]
name = "simd"
source = "b.cpp"
decomposition = "row_simd"
dtypes = ["f32", "bf16"]
[variants.params]
ACCUMULATORS = [4, 1, 2]
PARALLEL = [0, 1]
)";
  }
  void TearDown() override { fs::remove_all(root_); }

  static memory::Strategy strategy(std::vector<memory::ParamEdit> edits) {
    memory::Strategy s;
    s.id = "test_strategy";
    s.edits = std::move(edits);
    return s;
  }

  fs::path root_;
};

TEST_F(TemplatesGeneratorTest, InitialProposalsCoverEachDecompositionAtDefaults) {
  TemplatesGenerator generator(load_family(root_.string(), "cpu", "toy"));
  std::vector<Proposal> proposals = generator.initial_proposals();
  ASSERT_EQ(proposals.size(), 2u);
  EXPECT_EQ(proposals[0].id, "serial[ACCUMULATORS=1]");
  EXPECT_EQ(proposals[1].id, "simd[ACCUMULATORS=4,PARALLEL=0]");
  EXPECT_EQ(proposals[1].job.defines.at("KF_ACCUMULATORS"), "4");
  EXPECT_EQ(proposals[1].job.source, "int b;\n");
}

TEST_F(TemplatesGeneratorTest, EditsMoveWithinAllowedValuesInNumericOrder) {
  TemplatesGenerator generator(load_family(root_.string(), "cpu", "toy"));
  Proposal simd = generator.initial_proposals()[1];
  // simd allows {4, 1, 2} with 4 the default: 4 is the largest, and "decrease" goes to 2.
  EXPECT_FALSE(generator.apply(simd, strategy({{"ACCUMULATORS", "increase", ""}})));
  auto down = generator.apply(simd, strategy({{"ACCUMULATORS", "decrease", ""}}));
  ASSERT_TRUE(down);
  EXPECT_EQ(down->point.params.at("ACCUMULATORS"), "2");
  auto up = generator.apply(*down, strategy({{"ACCUMULATORS", "increase", ""}}));
  ASSERT_TRUE(up);
  EXPECT_EQ(up->point.params.at("ACCUMULATORS"), "4");
}

TEST_F(TemplatesGeneratorTest, EditAtTheLimitOrOnAMissingParamIsNotApplicable) {
  TemplatesGenerator generator(load_family(root_.string(), "cpu", "toy"));
  Proposal simd = generator.initial_proposals()[1];
  EXPECT_FALSE(generator.apply(simd, strategy({{"ACCUMULATORS", "max", ""}})));
  EXPECT_FALSE(generator.apply(simd, strategy({{"TILE_ROWS", "increase", ""}})));
  Proposal serial = generator.initial_proposals()[0];
  EXPECT_FALSE(generator.apply(serial, strategy({{"PARALLEL", "set", "1"}})));
  auto parallel = generator.apply(simd, strategy({{"PARALLEL", "set", "1"}}));
  ASSERT_TRUE(parallel);
  EXPECT_EQ(parallel->parent_id, simd.id);
  EXPECT_NE(parallel->change.find("PARALLEL 0 -> 1"), std::string::npos);
}

TEST_F(TemplatesGeneratorTest, VariantSwitchKeepsSharedParameters) {
  TemplatesGenerator generator(load_family(root_.string(), "cpu", "toy"));
  Proposal serial = generator.initial_proposals()[0];
  auto more = generator.apply(serial, strategy({{"ACCUMULATORS", "set", "2"}}));
  ASSERT_TRUE(more);
  auto switched = generator.apply(*more, strategy({{"", "variant", "row_simd"}}));
  ASSERT_TRUE(switched);
  EXPECT_EQ(switched->point.variant, "simd");
  EXPECT_EQ(switched->point.params.at("ACCUMULATORS"), "2");
  EXPECT_EQ(switched->point.params.at("PARALLEL"), "0");
}

TEST_F(TemplatesGeneratorTest, StandaloneSourceCarriesTheDefines) {
  TemplatesGenerator generator(load_family(root_.string(), "cpu", "toy"));
  std::string text = generator.standalone_source(generator.initial_proposals()[1]);
  EXPECT_NE(text.find("#define KF_PARALLEL 0"), std::string::npos);
  EXPECT_NE(text.find("int b;"), std::string::npos);
}

// A variant that needs an architecture-specific target builds with it, and its standalone source
// says so on its first line (kforge eval and solution.py read it there).
TEST_F(TemplatesGeneratorTest, AVariantsCudaTargetReachesTheJobAndTheStandaloneSource) {
  KernelFamily family = load_family(root_.string(), "cpu", "toy");
  family.variants[1].cuda_arch = "sm_90a";
  TemplatesGenerator generator(family);
  const std::vector<Proposal> proposals = generator.initial_proposals();
  EXPECT_EQ(proposals[0].job.cuda_arch, "");
  EXPECT_EQ(proposals[1].job.cuda_arch, "sm_90a");
  const std::string text = generator.standalone_source(proposals[1]);
  EXPECT_EQ(text.rfind("// kforge: nvcc target sm_90a", 0), 0u) << text;
  EXPECT_EQ(compile::declared_cuda_arch(text), "sm_90a");
  EXPECT_EQ(compile::declared_cuda_arch(generator.standalone_source(proposals[0])), "");
}

TEST_F(TemplatesGeneratorTest, MissingFamilyIsAClearError) {
  try {
    load_family(root_.string(), "cuda", "toy");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no built-in kernels for family 'toy' on backend 'cuda'"),
              std::string::npos);
  }
}

TEST_F(TemplatesGeneratorTest, OnlyVariantsTakingTheTaskDtypeAreSearchedWithItsDefine) {
  KernelFamily family = load_family(root_.string(), "cpu", "toy");
  EXPECT_EQ(family.variants[0].dtypes, std::vector<std::string>{"f32"});  // the default
  TemplatesGenerator bf16(family, "bf16");
  std::vector<Proposal> proposals = bf16.initial_proposals();
  ASSERT_EQ(proposals.size(), 1u);
  EXPECT_EQ(proposals[0].point.variant, "simd");
  EXPECT_EQ(proposals[0].job.defines.at("KF_DTYPE"), "KF_DTYPE_BF16");
  // A variant switch to one that does not take bf16 is not applicable.
  EXPECT_FALSE(bf16.apply(proposals[0], strategy({{"", "variant", "serial"}})).has_value());
  // f32 keeps the sources' default: no KF_DTYPE define.
  TemplatesGenerator f32(family);
  EXPECT_EQ(f32.initial_proposals()[0].job.defines.count("KF_DTYPE"), 0u);
  try {
    TemplatesGenerator f16(family, "f16");
    FAIL() << "no variant takes f16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("do not take f16 inputs (their variants take: bf16, f32)"),
              std::string::npos) << e.what();
  }
}

TEST_F(TemplatesGeneratorTest, MalformedDtypesNameTheField) {
  std::ofstream(root_ / "cpu" / "toy" / "family.toml") << R"(
family = "toy"
[[variants]]
name = "serial"
source = "a.cpp"
dtypes = ["f8"]
)";
  try {
    load_family(root_.string(), "cpu", "toy");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("variants[0].dtypes: values must be"), std::string::npos)
        << e.what();
  }
}

TEST_F(TemplatesGeneratorTest, EditsMoveWithinTheTaskDtypesValues) {
  std::ofstream(root_ / "cpu" / "toy" / "family.toml") << R"(
family = "toy"
[[variants]]
name = "simd"
source = "b.cpp"
dtypes = ["f32", "f16"]
[variants.params]
VEC = [4, 1, 2]
[variants.params_by_dtype.f16]
VEC = [8, 4, 2, 1]
)";
  KernelFamily family = load_family(root_.string(), "cpu", "toy");
  // f32: the default is the largest value, so `max` does not apply and VEC = 8 is refused.
  TemplatesGenerator f32(family);
  Proposal f32_start = f32.initial_proposals()[0];
  EXPECT_EQ(f32_start.id, "simd[VEC=4]");
  EXPECT_FALSE(f32.apply(f32_start, strategy({{"VEC", "max", ""}})));
  EXPECT_FALSE(f32.apply(f32_start, strategy({{"VEC", "set", "8"}})));
  EXPECT_THROW(f32.make_proposal({"simd", {{"VEC", "8"}}}), Error);
  // f16: starts at 8; `decrease` then `max` walk the f16 list.
  TemplatesGenerator f16(family, "f16");
  Proposal f16_start = f16.initial_proposals()[0];
  EXPECT_EQ(f16_start.id, "simd[VEC=8]");
  EXPECT_EQ(f16_start.job.defines.at("KF_VEC"), "8");
  auto down = f16.apply(f16_start, strategy({{"VEC", "decrease", ""}}));
  ASSERT_TRUE(down);
  EXPECT_EQ(down->point.params.at("VEC"), "4");
  auto up = f16.apply(*down, strategy({{"VEC", "max", ""}}));
  ASSERT_TRUE(up);
  EXPECT_EQ(up->point.params.at("VEC"), "8");
}

TEST(BundledFamilies, EveryExampleFamilyHasTwoOrMoreVariantsPerBackend) {
  for (const char* backend : {"cpu", "cuda"}) {
    for (const char* family :
         {"rmsnorm", "softmax", "gemv", "gemv_t", "log_softmax", "layernorm", "rmsnorm_channels"}) {
      KernelFamily loaded =
          load_family((fs::path(KFORGE_SOURCE_DIR) / "kernels").string(), backend, family);
      EXPECT_GE(loaded.variants.size(), 2u) << backend << "/" << family;
    }
  }
}

}  // namespace
}  // namespace kforge::generation

namespace kforge::generation {
namespace {

// The built-in Triton families (kernels/triton/) written into a ModelNew shell: each point's
// candidate is the shell with the variant's module (its knobs as KF_<NAME> constants first) in
// place of the marker line; a shell without the marker is refused.
TEST(TritonTemplatesTest, EachPointIsTheShellWithTheVariantModuleWrittenIn) {
  const std::string shell = std::string("import torch\n") + kKernelModuleMarker +
                            "\n_kforge_run = kforge_run\nclass ModelNew: pass\n";
  const KernelFamily family =
      load_family((fs::path(KFORGE_SOURCE_DIR) / "kernels").string(), "triton", "softmax");
  EXPECT_EQ(family.backend, "cuda");  // Triton kernels run on the cuda backend
  TemplatesGenerator generator(family, "f32", shell);
  const std::vector<Proposal> hints = generator.initial_proposals();
  ASSERT_EQ(hints.size(), family.variants.size());
  const Proposal& online = hints.at(0);
  EXPECT_EQ(online.job.source_name, "online_row.py");
  EXPECT_TRUE(online.job.defines.empty());
  EXPECT_EQ(online.job.source.find(kKernelModuleMarker), std::string::npos);
  EXPECT_NE(online.job.source.find("KF_BLOCK = 2048\n"), std::string::npos);
  EXPECT_NE(online.job.source.find("KF_BLOCK_THREADS = 256\n"), std::string::npos);
  EXPECT_NE(online.job.source.find("def kforge_run(inputs, outputs, scalars):"),
            std::string::npos);
  EXPECT_LT(online.job.source.find("import torch"), online.job.source.find("KF_BLOCK"));
  EXPECT_LT(online.job.source.find("KF_BLOCK"), online.job.source.find("_kforge_run ="));
  EXPECT_EQ(generator.standalone_source(online), online.job.source);

  // An edit changes the constant, as it changes -DKF_<NAME> for a native kernel.
  memory::Strategy bigger;
  bigger.id = "bigger_tiles";
  bigger.edits = {{"BLOCK", "increase", ""}};
  const std::optional<Proposal> next = generator.apply(online, bigger);
  ASSERT_TRUE(next);
  EXPECT_NE(next->job.source.find("KF_BLOCK = 4096\n"), std::string::npos);

  EXPECT_THROW(TemplatesGenerator(family, "f32", "import torch\n"), Error);
}

// A variant with max_dims (softmax row_resident: cols = 16384) is left out for a task whose
// workloads are larger, with a line saying why, and kept otherwise; a family left with no
// variant is an error naming the sizes.
TEST(TritonTemplatesTest, VariantsBeyondTheirMaxDimsAreLeftOut) {
  const std::string shell = std::string("import torch\n") + kKernelModuleMarker + "\n";
  const KernelFamily family =
      load_family((fs::path(KFORGE_SOURCE_DIR) / "kernels").string(), "triton", "softmax");
  const std::vector<Workload> kernelbench_23 = {
      {"gate", {{"rows", 7}, {"cols", 4097}}, false},
      {"problem", {{"rows", 4096}, {"cols", 393216}}, true}};
  EXPECT_EQ(largest_dims(kernelbench_23),
            (std::map<std::string, int64_t>{{"cols", 393216}, {"rows", 4096}}));

  TemplatesGenerator generator(family, "f32", shell);
  EXPECT_EQ(generator.set_task_dims(largest_dims(kernelbench_23)),
            std::vector<std::string>{"row_resident: cols = 393216 exceeds its 16384"});
  std::vector<std::string> variants;
  for (const Proposal& hint : generator.initial_proposals()) variants.push_back(hint.point.variant);
  EXPECT_EQ(variants, (std::vector<std::string>{"online_row", "split_row"}));

  TemplatesGenerator short_rows(family, "f32", shell);
  EXPECT_TRUE(short_rows.set_task_dims({{"rows", 4096}, {"cols", 8192}}).empty());
  EXPECT_EQ(short_rows.initial_proposals().size(), family.variants.size());

  KernelFamily only_resident = family;
  std::erase_if(only_resident.variants,
                [](const TemplateVariant& v) { return v.name != "row_resident"; });
  TemplatesGenerator none_left(only_resident, "f32", shell);
  try {
    none_left.set_task_dims(largest_dims(kernelbench_23));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no variant of family 'softmax' computes this task's "
                                         "sizes (row_resident: cols = 393216 exceeds its 16384)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kforge::generation
