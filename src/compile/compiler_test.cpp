#include "compile/compiler.h"

#include <gtest/gtest.h>

namespace kforge::compile {
namespace {

TEST(DeclaredCudaArch, ReadsTheMarkerLineOfAStandaloneSource) {
  EXPECT_EQ(declared_cuda_arch("// kforge: nvcc target sm_90a (build with -gencode=...)\n"
                               "// kforge candidate x\n__global__ void k() {}\n"),
            "sm_90a");
  EXPECT_EQ(declared_cuda_arch("#define KF_BN 128\n// kforge: nvcc target sm_100a\n"), "sm_100a");
}

TEST(DeclaredCudaArch, IgnoresWhatIsNotTheMarker) {
  EXPECT_EQ(declared_cuda_arch("__global__ void k() {}\n"), "");
  EXPECT_EQ(declared_cuda_arch("int x; // kforge: nvcc target sm_90a\n"), "");  // not a line
  EXPECT_EQ(declared_cuda_arch("// kforge: nvcc target sm_90\n"), "");  // a plain target
  EXPECT_EQ(declared_cuda_arch("// kforge: nvcc target compute_90a\n"), "");
}

}  // namespace
}  // namespace kforge::compile
