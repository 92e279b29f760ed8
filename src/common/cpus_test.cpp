#include "common/cpus.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "common/error.h"

namespace kforge {
namespace {

// Sets an environment variable for one test and restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

int mask_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  EXPECT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  return CPU_COUNT(&mask);
}

TEST(SlurmCpus, ReadsTheJobsAllocation) {
  EXPECT_EQ(slurm_cpus(std::nullopt, "4", "4"), std::nullopt);  // not inside a job
  EXPECT_EQ(slurm_cpus("12", "3", "8"), 3);                      // --cpus-per-task first
  EXPECT_EQ(slurm_cpus("12", std::nullopt, "4(x2),2"), 4);       // this node's count
  EXPECT_EQ(slurm_cpus("12", std::nullopt, "1"), 1);
  EXPECT_EQ(slurm_cpus("12", "x", "2"), 2);                       // unreadable: the next one
  EXPECT_EQ(slurm_cpus("12", std::nullopt, std::nullopt), std::nullopt);
  EXPECT_EQ(slurm_cpus("12", std::nullopt, "0"), std::nullopt);
}

TEST(UsableCpus, IsTheAffinityMaskOutsideAJob) {
  ScopedEnv cpus("KFORGE_CPUS", nullptr), job("SLURM_JOB_ID", nullptr);
  EXPECT_EQ(usable_cpus(), mask_cpus());
}

TEST(UsableCpus, KeepsToASlurmJobsAllocation) {
  ScopedEnv cpus("KFORGE_CPUS", nullptr), job("SLURM_JOB_ID", "7"),
      per_task("SLURM_CPUS_PER_TASK", nullptr), per_node("SLURM_JOB_CPUS_PER_NODE", "1");
  EXPECT_EQ(usable_cpus(), 1);
}

TEST(UsableCpus, NeverExceedsTheMaskOrGoesBelowOne) {
  ScopedEnv job("SLURM_JOB_ID", nullptr), cpus("KFORGE_CPUS", "100000");
  EXPECT_EQ(usable_cpus(), mask_cpus());
  ScopedEnv one("KFORGE_CPUS", "1");
  EXPECT_EQ(usable_cpus(), 1);
}

TEST(UsableCpus, RejectsAMalformedKforgeCpus) {
  ScopedEnv job("SLURM_JOB_ID", nullptr);
  for (const char* bad : {"", "0", "two", "2x", "-1"}) {
    ScopedEnv cpus("KFORGE_CPUS", bad);
    try {
      usable_cpus();
      ADD_FAILURE() << "accepted KFORGE_CPUS='" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("KFORGE_CPUS"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kforge
