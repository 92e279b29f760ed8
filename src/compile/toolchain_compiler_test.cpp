#include "compile/toolchain_compiler.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "backends/backend.h"
#include "common/error.h"
#include "common/files.h"
#include "common/paths.h"

namespace kforge::compile {
namespace {
namespace fs = std::filesystem;

class ToolchainCompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = fs::temp_directory_path() /
             ("kforge_cc_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(cache_);
    options_.cache_dir = cache_.string();
    options_.include_dirs = kernel_include_dirs();
  }
  void TearDown() override { fs::remove_all(cache_); }

  static CompileJob cpu_job(const std::string& body) {
    CompileJob job;
    job.backend = "cpu";
    job.source_name = "k.cpp";
    job.source = "#include <kforge/kernel.h>\n" + body;
    return job;
  }

  fs::path cache_;
  ToolchainOptions options_;
};

TEST_F(ToolchainCompilerTest, BuildsASharedObjectAndCachesIt) {
  ToolchainCompiler compiler(options_, &backends::toolchain_for);
  CompileJob job = cpu_job("KFORGE_API int kforge_run(const kforge_args*) { return KF_X; }\n");
  job.defines["KF_X"] = "0";
  Artifact first = compiler.compile(job);
  ASSERT_EQ(first.verdict, Verdict::ok) << first.log;
  EXPECT_TRUE(fs::exists(first.path));
  EXPECT_FALSE(first.from_cache);
  Artifact second = compiler.compile(job);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.key, first.key);
  job.defines["KF_X"] = "1";  // a different define is a different artifact
  EXPECT_NE(compiler.compile(job).key, first.key);
}

TEST_F(ToolchainCompilerTest, APythonCandidateIsStagedByContentNotCompiled) {
  ToolchainCompiler compiler(options_, &backends::toolchain_for);
  CompileJob job;
  job.backend = "cpu";
  job.source_name = "candidate.py";
  job.source = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n";
  const Artifact first = compiler.compile(job);
  ASSERT_EQ(first.verdict, Verdict::ok) << first.log;
  EXPECT_EQ(fs::path(first.path).extension(), ".py");
  EXPECT_EQ(read_file(first.path), job.source);
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.compile_s, 0.0);
  const Artifact again = compiler.compile(job);
  EXPECT_TRUE(again.from_cache);
  EXPECT_EQ(again.path, first.path);
  job.source += "# edited\n";
  EXPECT_NE(compiler.compile(job).key, first.key);
}

TEST_F(ToolchainCompilerTest, AnEditedKforgeHeaderChangesTheKey) {
  // Candidates include the ABI header <kforge/kernel.h>: the cache must not hand back a binary
  // built against the header's previous text.
  const fs::path headers = cache_ / "include";
  fs::create_directories(headers / "kforge");
  std::ofstream(headers / "kforge" / "value.h") << "#define KF_VALUE 0\n";
  options_.include_dirs.insert(options_.include_dirs.begin(), headers.string());
  CompileJob job = cpu_job(
      "#include <kforge/value.h>\nKFORGE_API int kforge_run(const kforge_args*) { return "
      "KF_VALUE; }\n");
  const Artifact first = ToolchainCompiler(options_, &backends::toolchain_for).compile(job);
  ASSERT_EQ(first.verdict, Verdict::ok) << first.log;
  EXPECT_EQ(ToolchainCompiler(options_, &backends::toolchain_for).compile(job).key, first.key);  // unchanged: same key
  std::ofstream(headers / "kforge" / "value.h") << "#define KF_VALUE 1\n";
  const Artifact second = ToolchainCompiler(options_, &backends::toolchain_for).compile(job);
  EXPECT_NE(second.key, first.key);
  EXPECT_FALSE(second.from_cache);
}

TEST_F(ToolchainCompilerTest, AnEditedKernelLibraryHeaderChangesTheKey) {
  // The built-in kernels' shared code lives in kernels/common, kernels/cpu/common and
  // kernels/cuda/common (included as <common/...>, <cpu/common/...>, <cuda/common/...>): an
  // edit there must not hand back a binary built against the previous text either.
  int round = 0;
  for (const std::string folder : {"common", "cpu/common", "cuda/common"}) {
    SCOPED_TRACE(folder);
    const fs::path library = cache_ / ("kernels" + std::to_string(round++));
    fs::create_directories(library / folder);
    std::ofstream(library / folder / "value.h") << "#define KF_VALUE 0\n";
    ToolchainOptions options = options_;
    options.include_dirs.insert(options.include_dirs.begin(), library.string());
    CompileJob job = cpu_job("#include <" + folder +
                             "/value.h>\nKFORGE_API int kforge_run(const kforge_args*) { return "
                             "KF_VALUE; }\n");
    const Artifact first = ToolchainCompiler(options, &backends::toolchain_for).compile(job);
    ASSERT_EQ(first.verdict, Verdict::ok) << first.log;
    EXPECT_EQ(ToolchainCompiler(options, &backends::toolchain_for).compile(job).key, first.key);
    std::ofstream(library / folder / "value.h") << "#define KF_VALUE 1\n";
    const Artifact second = ToolchainCompiler(options, &backends::toolchain_for).compile(job);
    EXPECT_NE(second.key, first.key);
    EXPECT_FALSE(second.from_cache);
  }
}

TEST_F(ToolchainCompilerTest, CompileErrorIsAVerdictWithTheLog) {
  ToolchainCompiler compiler(options_, &backends::toolchain_for);
  Artifact artifact = compiler.compile(cpu_job("this is not C++;\n"));
  EXPECT_EQ(artifact.verdict, Verdict::compile_error);
  EXPECT_NE(artifact.log.find("error"), std::string::npos);
  EXPECT_TRUE(compiler.compile(cpu_job("this is not C++;\n")).from_cache)
      << "failed builds are cached results, never retried blindly";
}

TEST_F(ToolchainCompilerTest, MissingCompilerIsAClearError) {
  options_.gxx = "kforge-no-such-compiler";
  ToolchainCompiler compiler(options_, &backends::toolchain_for);
  try {
    compiler.toolchain("cpu");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kforge-no-such-compiler"), std::string::npos);
  }
}

TEST_F(ToolchainCompilerTest, MissingNvccIsAClearError) {
  if (backends::find_backend("cuda") == nullptr) GTEST_SKIP() << "this build has no cuda backend";
  options_.nvcc = "/nonexistent/nvcc";
  ToolchainCompiler compiler(options_, &backends::toolchain_for);
  try {
    compiler.toolchain("cuda");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nvcc not found"), std::string::npos) << e.what();
  }
}

TEST_F(ToolchainCompilerTest, CudaCandidatesCompileForSm90) {
  if (backends::find_backend("cuda") == nullptr) GTEST_SKIP() << "this build has no cuda backend";
  ToolchainCompiler compiler(options_, &backends::toolchain_for);
  CompileJob job;
  job.backend = "cuda";
  job.source_name = "k.cu";
  job.source = R"(#include <kforge/kernel.h>
__global__ void scale(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] *= 2; }
KFORGE_API int kforge_run(const kforge_args* a) {
  scale<<<1, 32, 0, (cudaStream_t)a->stream>>>((float*)a->outputs[0].data, 1);
  return (int)cudaGetLastError();
})";
  Artifact artifact = compiler.compile(job);
  ASSERT_EQ(artifact.verdict, Verdict::ok) << artifact.log;
  EXPECT_NE(compiler.toolchain("cuda").find("nvcc 13"), std::string::npos)
      << compiler.toolchain("cuda");
}

}  // namespace
}  // namespace kforge::compile

namespace kforge::compile {
namespace {

// A toolchain of the seam's own: /bin/true "compiles" anything without writing the library, so
// a build through it is a compile_error whose cached source shows the toolchain's extension.
class TrueToolchain final : public Toolchain {
 public:
  std::string label() const override { return "true"; }
  std::string source_extension() const override { return ".xyz"; }
  std::string locate(const ToolchainOptions& /*options*/) const override { return "/bin/true"; }
  std::vector<std::string> flags(const ToolchainOptions& options) const override {
    return {"--pinned", "--arch=" + options.cuda_arch};
  }
};

TEST(ToolchainSeam, TheCompilerTakesProgramFlagsAndExtensionFromTheBackendsToolchain) {
  const fs::path cache = fs::temp_directory_path() / "kforge_cc_seam";
  fs::remove_all(cache);
  ToolchainOptions options;
  options.cache_dir = cache.string();
  options.include_dirs = {"/inc"};
  options.cuda_arch = "sm_1";
  static const TrueToolchain chain;
  ToolchainCompiler compiler(options, [](const std::string& backend) -> const Toolchain& {
    if (backend != "fake") throw Error("no toolchain for '" + backend + "'");
    return chain;
  });
  CompileJob job;
  job.backend = "fake";
  job.source = "anything";
  job.defines = {{"KF_VEC", "4"}};
  EXPECT_EQ(compiler.command(job, "SRC", "OUT"),
            (std::vector<std::string>{"/bin/true", "--pinned", "--arch=sm_1", "-I/inc",
                                      "-DKF_VEC=4", "SRC", "-o", "OUT"}));
  const Artifact artifact = compiler.compile(job);
  EXPECT_EQ(artifact.verdict, Verdict::compile_error);  // no library was written
  EXPECT_TRUE(fs::exists(cache / (artifact.key + ".xyz")));
  job.backend = "other";
  EXPECT_THROW(compiler.compile(job), Error);
  fs::remove_all(cache);
}

}  // namespace
}  // namespace kforge::compile
