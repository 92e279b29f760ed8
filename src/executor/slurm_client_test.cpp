// The parsers of Slurm's command output, on text recorded from Slurm 22.05 (Debian 12).
#include "executor/slurm_client.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace kforge::executor {
namespace {

TEST(JobStateWords, LongAndCompactNamesAndTheWordsAfterThemMapToOneState) {
  EXPECT_EQ(parse_job_state("PENDING"), JobState::pending);
  EXPECT_EQ(parse_job_state("R"), JobState::running);
  EXPECT_EQ(parse_job_state("COMPLETING"), JobState::running);
  EXPECT_EQ(parse_job_state("COMPLETED"), JobState::completed);
  EXPECT_EQ(parse_job_state("FAILED"), JobState::failed);
  EXPECT_EQ(parse_job_state("CANCELLED by 0"), JobState::cancelled);
  EXPECT_EQ(parse_job_state("CANCELLED+"), JobState::cancelled);
  EXPECT_EQ(parse_job_state("TIMEOUT"), JobState::timeout);
  EXPECT_EQ(parse_job_state("NODE_FAIL"), JobState::node_fail);
  EXPECT_EQ(parse_job_state("OUT_OF_MEMORY"), JobState::out_of_memory);
  EXPECT_EQ(parse_job_state("SOMETHING_NEW"), JobState::unknown);
}

TEST(JobStateWords, OnlyPendingAndRunningHaveNotEnded) {
  EXPECT_FALSE(has_ended(JobState::pending));
  EXPECT_FALSE(has_ended(JobState::running));
  EXPECT_TRUE(has_ended(JobState::completed));
  EXPECT_TRUE(has_ended(JobState::cancelled));
  EXPECT_TRUE(has_ended(JobState::unknown));  // a state kforge does not know is not waited on
}

TEST(ParseSlurmOutput, SqueueLinesGiveIdStateReasonAndNode) {
  const std::vector<JobStatus> jobs =
      parse_squeue("1|COMPLETED|None|vm\n\n2|PENDING|Resources|\n3|CANCELLED|None|(null)\n");
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[0].job_id, "1");
  EXPECT_EQ(jobs[0].state, JobState::completed);
  EXPECT_EQ(jobs[0].reason, "");  // "None" is nothing
  EXPECT_EQ(jobs[0].node, "vm");
  EXPECT_EQ(jobs[1].state, JobState::pending);
  EXPECT_EQ(jobs[1].reason, "Resources");
  EXPECT_EQ(jobs[2].node, "");
}

TEST(ParseSlurmOutput, ALineWithoutFieldsIsAnErrorQuotingIt) {
  try {
    parse_squeue("slurm_load_jobs error: Unable to contact slurm controller\n");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Unable to contact slurm controller"), std::string::npos)
        << e.what();
  }
}

TEST(ParseSlurmOutput, SacctLeavesOutStepsAndReadsTheStateWithItsMark) {
  const std::vector<JobStatus> jobs =
      parse_sacct("7|CANCELLED by 1000|None|node3\n7.batch|CANCELLED|None|node3\n8|TIMEOUT||n4\n");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].state, JobState::cancelled);
  EXPECT_EQ(jobs[0].state_text, "CANCELLED by 1000");
  EXPECT_EQ(jobs[1].state, JobState::timeout);
}

TEST(ParseSlurmOutput, SbatchParsableGivesTheJobIdAfterWarningsAndBeforeTheCluster) {
  EXPECT_EQ(parse_sbatch_job_id("12\n"), "12");
  EXPECT_EQ(parse_sbatch_job_id("sbatch: warning: can't honor --mem\n34;cluster1\n"), "34");
  EXPECT_THROW(parse_sbatch_job_id("sbatch: error: Batch job submission failed\n"), Error);
}

}  // namespace
}  // namespace kforge::executor
