#include <gtest/gtest.h>

#include "backends/cuda/cuda.h"
#include "common/error.h"

namespace kforge::backends {
namespace {

TEST(NvccArchFlag, PlainTargetsKeepPtxArchitectureSpecificOnesDoNot) {
  EXPECT_EQ(nvcc_arch_flag("sm_90"), "-arch=sm_90");
  EXPECT_EQ(nvcc_arch_flag("sm_80"), "-arch=sm_80");
  EXPECT_EQ(nvcc_arch_flag("sm_90a"), "-gencode=arch=compute_90a,code=sm_90a");
  EXPECT_EQ(nvcc_arch_flag("sm_100a"), "-gencode=arch=compute_100a,code=sm_100a");
}

TEST(NvccArchFlag, RejectsWhatIsNotAnArchitecture) {
  for (const char* bad : {"", "sm_", "sm_a", "90", "compute_90", "sm_9x", "sm_90; rm -rf /"}) {
    EXPECT_THROW(nvcc_arch_flag(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace kforge::backends
