#include "generation/kernel_family.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/error.h"

namespace kforge::generation {
namespace {
namespace fs = std::filesystem;

class KernelFamilyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("kforge_family_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "cuda" / "toy");
    std::ofstream(root_ / "cuda" / "toy" / "a.cu") << "int a;\n";
  }
  void TearDown() override { fs::remove_all(root_); }

  // A one-variant family taking every type; `extra` is TOML of the variant's own table.
  void write_family(const std::string& extra) {
    std::ofstream(root_ / "cuda" / "toy" / "family.toml") << R"(
family = "toy"
[[variants]]
name = "rows"
source = "a.cu"
dtypes = ["f32", "f16", "bf16"]
)" << extra << R"(
[variants.params]
VEC = [4, 1, 2]
UNROLL = [1, 2]
)";
  }

  // The Error load_family throws, or "" when it loads.
  std::string load_error() {
    try {
      load_family(root_.string(), "cuda", "toy");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path root_;
};

TEST_F(KernelFamilyTest, ParamsByDtypeReplaceThatParameterForThatTypeOnly) {
  write_family(R"(
[variants.params_by_dtype.f16]
VEC = [8, 4, 2, 1]
)");
  const KernelFamily family = load_family(root_.string(), "cuda", "toy");
  ASSERT_EQ(family.variants[0].params_by_dtype.count("f16"), 1u);

  const TemplateVariant f16 = for_dtype(family, "f16").variants[0];
  EXPECT_EQ(f16.param("VEC")->values, (std::vector<std::string>{"8", "4", "2", "1"}));
  EXPECT_EQ(f16.param("UNROLL")->values, (std::vector<std::string>{"1", "2"}));
  EXPECT_TRUE(f16.params_by_dtype.empty());  // already applied
  EXPECT_EQ(default_point(f16).id(), "rows[UNROLL=1,VEC=8]");

  for (const char* dtype : {"f32", "bf16"}) {
    const TemplateVariant other = for_dtype(family, dtype).variants[0];
    EXPECT_EQ(other.param("VEC")->values, (std::vector<std::string>{"4", "1", "2"})) << dtype;
    EXPECT_EQ(default_point(other).id(), "rows[UNROLL=1,VEC=4]") << dtype;
  }
}

TEST_F(KernelFamilyTest, ParamsByDtypeForATypeTheVariantDoesNotTakeNamesTheField) {
  write_family(R"(
[variants.params_by_dtype.f8]
VEC = [8]
)");
  const std::string error = load_error();
  EXPECT_NE(error.find("family.toml: variants[0].params_by_dtype.f8: 'f8' is not one of the "
                       "variant's dtypes (f32, f16, bf16)"),
            std::string::npos)
      << error;
}

TEST_F(KernelFamilyTest, ParamsByDtypeForAParameterNotInParamsNamesTheField) {
  write_family(R"(
[variants.params_by_dtype.bf16]
VECTOR = [8, 4]
)");
  const std::string error = load_error();
  EXPECT_NE(error.find("variants[0].params_by_dtype.bf16.VECTOR: not a parameter of the variant"),
            std::string::npos)
      << error;
}

TEST_F(KernelFamilyTest, MalformedParamsByDtypeNameTheField) {
  write_family("params_by_dtype = [1]\n");
  EXPECT_NE(load_error().find("variants[0].params_by_dtype: expected a table of element types"),
            std::string::npos);
  write_family("[variants.params_by_dtype]\nf16 = [8]\n");
  EXPECT_NE(load_error().find("params_by_dtype.f16: expected a table of parameter value lists"),
            std::string::npos);
  write_family("[variants.params_by_dtype.f16]\nVEC = []\n");
  EXPECT_NE(load_error().find("params_by_dtype.f16.VEC: expected a non-empty array of values"),
            std::string::npos);
  write_family("[variants.params_by_dtype.f16]\nVEC = [8.5]\n");
  EXPECT_NE(load_error().find("params_by_dtype.f16.VEC: values must be integers or strings"),
            std::string::npos);
}

TEST_F(KernelFamilyTest, AVariantMayNameItsOwnCudaTarget) {
  write_family("cuda_arch = \"sm_90a\"\n");
  EXPECT_EQ(load_family(root_.string(), "cuda", "toy").variants.at(0).cuda_arch, "sm_90a");
  write_family("");
  EXPECT_EQ(load_family(root_.string(), "cuda", "toy").variants.at(0).cuda_arch, "");
  write_family("cuda_arch = 90\n");
  EXPECT_NE(load_error().find("variants[0].cuda_arch: expected an nvcc target"), std::string::npos);
  write_family("cuda_arch = \"\"\n");
  EXPECT_NE(load_error().find("variants[0].cuda_arch: expected an nvcc target"), std::string::npos);
}

TEST_F(KernelFamilyTest, MaxDimsAreReadAndMalformedOnesNameTheField) {
  write_family("[variants.max_dims]\ncols = 16384\n");
  const KernelFamily family = load_family(root_.string(), "cuda", "toy");
  EXPECT_EQ(family.variants.at(0).max_dims, (std::map<std::string, int64_t>{{"cols", 16384}}));
  write_family("");
  EXPECT_TRUE(load_family(root_.string(), "cuda", "toy").variants.at(0).max_dims.empty());
  write_family("max_dims = 5\n");
  EXPECT_NE(load_error().find("variants[0].max_dims: expected a table of dim = size"),
            std::string::npos);
  for (const char* bad : {"\"big\"", "0", "1.5"}) {
    write_family(std::string("[variants.max_dims]\ncols = ") + bad + "\n");
    EXPECT_NE(load_error().find("variants[0].max_dims.cols: expected a positive integer"),
              std::string::npos)
        << bad;
  }
}

// Every bundled cuda variant whose source issues wgmma (it includes cuda/common/wgmma.cuh or the
// RS GEMM built on it) builds for Hopper's architecture-specific target, and no other does: a
// plain sm_90 build of a wgmma kernel compiles but computes nothing.
TEST(BundledFamilies, ExactlyTheWgmmaVariantsNeedSm90a) {
  const fs::path kernels = fs::path(KFORGE_SOURCE_DIR) / "kernels";
  int wgmma_variants = 0;
  for (const fs::directory_entry& dir : fs::directory_iterator(kernels / "cuda")) {
    if (!fs::exists(dir.path() / "family.toml")) continue;
    const KernelFamily family =
        load_family(kernels.string(), "cuda", dir.path().filename().string());
    for (const TemplateVariant& variant : family.variants) {
      std::ifstream in(variant.source_path);
      const std::string source((std::istreambuf_iterator<char>(in)), {});
      ASSERT_FALSE(source.empty()) << variant.source_path;
      const bool wgmma = source.find("cuda/common/wgmma.cuh") != std::string::npos ||
                         source.find("cuda/common/gemm_wgmma_rs.cuh") != std::string::npos;
      wgmma_variants += wgmma ? 1 : 0;
      EXPECT_EQ(variant.cuda_arch, wgmma ? "sm_90a" : "") << family.family << "/" << variant.name;
    }
  }
  // gemm_epilogue's tf32x3_wgmma and tf32x3_wgmma_rs, attention's unfused_wgmma_rs,
  // grouped_conv's implicit_gemm_wgmma_rs.
  EXPECT_GE(wgmma_variants, 4);
  const KernelFamily gemm = load_family(kernels.string(), "cuda", "gemm_epilogue");
  ASSERT_NE(gemm.variant("warpgroup_mma"), nullptr);
  ASSERT_NE(gemm.variant("warpgroup_mma_rs"), nullptr);
  const KernelFamily conv = load_family(kernels.string(), "cuda", "grouped_conv");
  ASSERT_NE(conv.variant("implicit_gemm_warpgroup_rs"), nullptr);
}

// The row-wise CUDA families move halves 8 at a time (16 bytes) and f32 at most 4 (16 bytes);
// the family tests (tests/kernel_families_test.cpp) and the search enumerate these lists.
TEST(BundledFamilies, RowWiseCudaFamiliesOfferVec8ForHalvesOnly) {
  const std::string kernels = (fs::path(KFORGE_SOURCE_DIR) / "kernels").string();
  for (const char* name : {"rmsnorm", "softmax", "log_softmax", "layernorm"}) {
    const KernelFamily family = load_family(kernels, "cuda", name);
    for (const char* dtype : {"f32", "f16", "bf16"}) {
      const std::string expected_default = std::string(dtype) == "f32" ? "4" : "8";
      for (const TemplateVariant& variant : for_dtype(family, dtype).variants) {
        const std::vector<std::string>& vec = variant.param("VEC")->values;
        const bool has_8 = std::find(vec.begin(), vec.end(), "8") != vec.end();
        EXPECT_EQ(has_8, std::string(dtype) != "f32")
            << name << "/" << variant.name << " " << dtype;
        EXPECT_EQ(vec.front(), expected_default) << name << "/" << variant.name << " " << dtype;
      }
    }
  }
}

}  // namespace
}  // namespace kforge::generation
