// The slurm executor against a fake SlurmClient: what it submits, how it throttles, how it
// turns Slurm's states into task ends, retries, cancels, and merges each job's memory once.
// The real Slurm runs in tests/cli_suite_slurm_test.cpp.
#include "executor/slurm_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "memory/sqlite_store.h"

namespace kforge::executor {
namespace {
namespace fs = std::filesystem;

const fs::path kSeedPath = fs::path(KFORGE_SOURCE_DIR) / "knowledge" / "seed.toml";

// Slurm as a table the test writes: a submitted job is PENDING until the test says otherwise.
class FakeSlurm final : public SlurmClient {
 public:
  struct Submission {
    std::vector<std::string> args;
    fs::path script;
  };
  std::string submit(const std::vector<std::string>& args, const fs::path& script) override {
    if (refuse) throw Error("sbatch refused " + script.string() + ": invalid partition");
    submissions.push_back({args, script});
    std::string id = std::to_string(100 + submissions.size());
    states[id] = {id, JobState::pending, "PENDING", "", ""};
    return id;
  }
  std::vector<JobStatus> query(const std::vector<std::string>& ids) override {
    ++queries;
    std::vector<JobStatus> out;
    for (const std::string& id : ids) {
      if (auto it = states.find(id); it != states.end()) out.push_back(it->second);
    }
    return out;
  }
  void cancel(const std::vector<std::string>& ids) override {
    cancelled.insert(cancelled.end(), ids.begin(), ids.end());
  }
  void set(const std::string& id, const std::string& state_text, const std::string& node = "n1") {
    states[id] = {id, parse_job_state(state_text), state_text, "", node};
  }

  std::vector<Submission> submissions;
  std::map<std::string, JobStatus> states;
  std::vector<std::string> cancelled;
  int queries = 0;
  bool refuse = false;
};

class FakeSlurmExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kforge_slurm_executor_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    auto fake = std::make_unique<FakeSlurm>();
    slurm_ = fake.get();
    SlurmSettings settings;
    settings.suite_dir = dir_ / "suite";
    settings.suite_memory = dir_ / "memory.sqlite";
    settings.seed_knowledge = kSeedPath;
    settings.max_parallel = 2;
    settings.sleep = [this](double) {
      ++sleeps_;
      if (on_sleep_) on_sleep_();
    };
    settings_ = settings;
    fake_ = std::move(fake);
  }
  void TearDown() override { fs::remove_all(dir_); }

  SlurmExecutor& executor() {
    if (!executor_) executor_ = std::make_unique<SlurmExecutor>(settings_, std::move(fake_));
    return *executor_;
  }

  TaskLaunch launch(const std::string& label) {
    TaskLaunch task;
    task.label = label;
    task.argv = {"/opt/kforge/bin/kforge",          "optimize",
                 "/t/" + label + ".toml",           "--run-dir",
                 (dir_ / "suite" / label).string(), "--memory",
                 (dir_ / "memory.sqlite").string()};
    task.run_dir = dir_ / "suite" / label;
    task.log_path = dir_ / "suite" / "logs" / (label + ".log");
    task.timeout_s = 90;
    return task;
  }

  fs::path job_dir(const std::string& label) { return dir_ / "suite" / "jobs" / label; }

  // What kforge optimize would do on the node: evidence into the job's memory, the exit code.
  void job_ran(const std::string& label, int exit_code, const std::string& candidate) {
    auto store = memory::SqliteStore::open(job_dir(label) / "memory.sqlite", "");
    memory::Evidence e;
    e.direction_id = "memory_access";
    e.provenance = {"cpu", "host", "", "g++ 12", "softmax", "hash-" + label};
    e.verdict = "ok";
    e.log_gain = 0.1;
    e.candidate_id = candidate;
    store->record(e);
    std::ofstream(job_dir(label) / "exit_code") << exit_code << "\n";
  }

  int64_t suite_evidence() {
    return memory::SqliteStore::open(dir_ / "memory.sqlite", kSeedPath)->evidence_count();
  }

  fs::path dir_;
  SlurmSettings settings_;
  std::unique_ptr<FakeSlurm> fake_;
  FakeSlurm* slurm_ = nullptr;
  std::unique_ptr<SlurmExecutor> executor_;
  int sleeps_ = 0;
  std::function<void()> on_sleep_;
};

TEST_F(FakeSlurmExecutorTest, EachTaskIsOneJobWithItsOwnMemorySnapshotAndScript) {
  executor().start(launch("softmax"));
  ASSERT_EQ(slurm_->submissions.size(), 1u);
  const FakeSlurm::Submission& job = slurm_->submissions[0];
  EXPECT_EQ(job.script, job_dir("softmax") / "job.sh");
  EXPECT_TRUE(fs::exists(job_dir("softmax") / "memory.sqlite")) << "the snapshot comes first";
  const std::string script = read_file(job.script);
  // The job writes its own memory, never the suite's.
  EXPECT_NE(script.find("'--memory' '" + (job_dir("softmax") / "memory.sqlite").string() + "'"),
            std::string::npos)
      << script;
  EXPECT_EQ(script.find("'--memory' '" + (dir_ / "memory.sqlite").string()), std::string::npos);
  EXPECT_NE(script.find("exit 97"), std::string::npos) << "checks the node sees the suite dir";
  const std::vector<std::string> expected_args = {
      "--job-name=kforge-softmax", "--output=" + (job_dir("softmax") / "slurm.out").string(),
      "--chdir=" + (dir_ / "suite").string(), "--time=2"};  // 90 s rounds up to 2 minutes
  EXPECT_EQ(job.args, expected_args);
}

TEST_F(FakeSlurmExecutorTest, PartitionGpusAndPassThroughArgumentsReachSbatch) {
  settings_.partition = "gpu";
  settings_.gpus_per_task = 2;
  settings_.sbatch_args = {"--account=lab", "--qos=short"};
  executor().start(launch("gemv"));
  const std::vector<std::string>& args = slurm_->submissions[0].args;
  const std::vector<std::string> tail(args.end() - 4, args.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"--partition=gpu", "--gpus=2", "--account=lab",
                                            "--qos=short"}));
  EXPECT_NE(read_file(job_dir("gemv") / "job.sh").find("'--devices' '0,1'"), std::string::npos);
}

TEST_F(FakeSlurmExecutorTest, NoMoreThanMaxParallelJobsAreInFlight) {
  EXPECT_EQ(executor().free_slots(), 2u);
  executor().start(launch("a"));
  executor().start(launch("b"));
  EXPECT_EQ(executor().free_slots(), 0u);
  on_sleep_ = [&] {
    job_ran("b", 0, "cb");
    slurm_->set("102", "COMPLETED");
  };
  std::vector<TaskEnd> ended = executor().wait_any();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].label, "b");
  ASSERT_TRUE(ended[0].status);
  EXPECT_EQ(ended[0].status->exit_code, 0);
  EXPECT_EQ(executor().free_slots(), 1u);
  EXPECT_EQ(executor().in_flight(), 1u);
}

TEST_F(FakeSlurmExecutorTest, AJobSlurmCancelledIsItsTaskEndWithTheReason) {
  executor().start(launch("a"));
  slurm_->set("101", "CANCELLED by 0", "node7");
  std::vector<TaskEnd> ended = executor().wait_any();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_FALSE(ended[0].status);
  EXPECT_EQ(ended[0].ended_by, "Slurm job 101 CANCELLED by 0 on node7");
  EXPECT_FALSE(ended[0].timed_out);
}

TEST_F(FakeSlurmExecutorTest, ATimedOutJobIsATimeout) {
  executor().start(launch("a"));
  slurm_->set("101", "TIMEOUT");
  std::vector<TaskEnd> ended = executor().wait_any();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_TRUE(ended[0].timed_out);
}

TEST_F(FakeSlurmExecutorTest, RetryFailedResubmitsOnceFromANewSnapshot) {
  settings_.retry_failed = true;
  executor().start(launch("a"));
  fs::create_directories(dir_ / "suite" / "a");  // the first attempt's run directory
  job_ran("a", 0, "first-attempt");
  fs::remove(job_dir("a") / "exit_code");  // it was killed before kforge exited
  slurm_->set("101", "NODE_FAIL");
  on_sleep_ = [&] {
    if (slurm_->submissions.size() == 2 && slurm_->states["102"].state == JobState::pending) {
      slurm_->set("102", "NODE_FAIL");  // the retry fails too: no third attempt
    }
  };
  std::vector<TaskEnd> ended = executor().wait_any();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(slurm_->submissions.size(), 2u);
  EXPECT_EQ(ended[0].ended_by, "Slurm job 102 NODE_FAIL on n1");
  EXPECT_NE(ended[0].note.find("retried once after Slurm job 101 NODE_FAIL"), std::string::npos)
      << ended[0].note;
  EXPECT_FALSE(fs::exists(dir_ / "suite" / "a")) << "kforge optimize needs an empty run dir";
  EXPECT_TRUE(fs::exists(dir_ / "suite" / ".incomplete" / "a-job101"));
  EXPECT_EQ(suite_evidence(), 1) << "the first attempt's evidence was merged before the retry";
}

TEST_F(FakeSlurmExecutorTest, AJobSlurmNoLongerKnowsEndsByItsExitCodeFile) {
  executor().start(launch("a"));
  job_ran("a", 3, "c");
  slurm_->states.clear();  // past MinJobAge, no accounting database
  std::vector<TaskEnd> ended = executor().wait_any();
  ASSERT_EQ(ended.size(), 1u);
  ASSERT_TRUE(ended[0].status);
  EXPECT_EQ(ended[0].status->exit_code, 3);
}

TEST_F(FakeSlurmExecutorTest, ANodeThatCannotSeeTheSuiteDirStopsTheSuiteSayingSo) {
  executor().start(launch("a"));
  std::ofstream(job_dir("a") / "slurm.out")
      << "kforge: error: the suite directory /x is not visible on node n9; --executor slurm "
         "needs it on a filesystem the compute nodes share\n";
  std::ofstream(job_dir("a") / "exit_code") << "97\n";
  slurm_->set("101", "FAILED");
  try {
    executor().wait_any();
    FAIL() << "expected an Error: every other job would fail alike";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not visible on node n9"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("the suite stops"), std::string::npos) << e.what();
  }
}

TEST_F(FakeSlurmExecutorTest, EachJobsEvidenceIsMergedOnceEvenWhenTheSuiteResumes) {
  executor().start(launch("a"));
  job_ran("a", 0, "ca");
  slurm_->set("101", "COMPLETED");
  ASSERT_EQ(executor().wait_any().size(), 1u);
  EXPECT_EQ(suite_evidence(), 1);
  executor().start(launch("b"));  // its snapshot holds a's evidence
  job_ran("b", 0, "cb");
  slurm_->set("102", "COMPLETED");
  ASSERT_EQ(executor().wait_any().size(), 1u);
  EXPECT_EQ(suite_evidence(), 2) << "b's copy of a's evidence is not added twice";
  executor().settle_finished("a");  // a resumed suite finds a done
  executor().settle_finished("b");
  EXPECT_EQ(suite_evidence(), 2);
  EXPECT_TRUE(nlohmann::json::parse(read_file(job_dir("a") / "job.json")).at("merged").get<bool>());
}

TEST_F(FakeSlurmExecutorTest, AResumedSuiteMergesAJobItsDriverDidNotGetTo) {
  executor().start(launch("a"));
  job_ran("a", 0, "ca");
  // The driver died here; the next session finds a's run finished.
  SlurmSettings again = settings_;
  SlurmExecutor resumed(again, std::make_unique<FakeSlurm>());
  resumed.settle_finished("a");
  EXPECT_EQ(suite_evidence(), 1);
  resumed.settle_finished("a");
  EXPECT_EQ(suite_evidence(), 1);
}

TEST_F(FakeSlurmExecutorTest, AResumedSuiteFollowsAJobStillRunningInsteadOfSubmittingAgain) {
  executor().start(launch("a"));  // job 101; then the driver is killed
  auto slurm = std::make_unique<FakeSlurm>();
  FakeSlurm* still = slurm.get();
  still->set("101", "RUNNING");
  SlurmExecutor resumed(settings_, std::move(slurm));
  ASSERT_TRUE(resumed.adopt_running(launch("a")));
  EXPECT_EQ(resumed.in_flight(), 1u);
  EXPECT_TRUE(still->submissions.empty());
  job_ran("a", 0, "ca");
  still->set("101", "COMPLETED");
  std::vector<TaskEnd> ended = resumed.wait_any();
  ASSERT_EQ(ended.size(), 1u);
  ASSERT_TRUE(ended[0].status);
  EXPECT_EQ(suite_evidence(), 1);
  EXPECT_FALSE(resumed.adopt_running(launch("a"))) << "an ended, merged job is not followed";
}

TEST_F(FakeSlurmExecutorTest, AJobThatEndedWhileNoDriverWatchedIsNotAdopted) {
  executor().start(launch("a"));
  auto slurm = std::make_unique<FakeSlurm>();
  slurm->set("101", "CANCELLED");
  SlurmExecutor resumed(settings_, std::move(slurm));
  EXPECT_FALSE(resumed.adopt_running(launch("a")));
}

TEST_F(FakeSlurmExecutorTest, StopCancelsEveryJobInFlight) {
  executor().start(launch("a"));
  executor().start(launch("b"));
  std::vector<TaskEnd> stopped = executor().cancel_all();
  EXPECT_EQ(slurm_->cancelled, (std::vector<std::string>{"101", "102"}));
  ASSERT_EQ(stopped.size(), 2u);
  EXPECT_TRUE(stopped[0].stopped);
  EXPECT_EQ(executor().in_flight(), 0u);
}

TEST_F(FakeSlurmExecutorTest, SbatchRefusingAJobIsAnErrorNamingTheTask) {
  executor();
  slurm_->refuse = true;
  try {
    executor().start(launch("a"));
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("task a"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("invalid partition"), std::string::npos) << e.what();
  }
  EXPECT_EQ(executor().in_flight(), 0u);
}

TEST_F(FakeSlurmExecutorTest, AReferenceCheckIsAJobThatNeedsNoMemoryAndIsFollowedAsACheck) {
  settings_.gpus_per_task = 1;
  TaskLaunch check;
  check.label = "cumsum";
  check.argv = {"/opt/kforge/bin/kforge", "task", "/t/cumsum.toml", "--check", "--report",
                (dir_ / "suite" / "checks" / "cumsum.json").string(), "--backend", "cpu"};
  check.log_path = dir_ / "suite" / "logs" / "cumsum.check.log";
  check.timeout_s = 90;
  check.kind = TaskKind::reference_check;
  executor().start(check);
  ASSERT_EQ(slurm_->submissions.size(), 1u);
  EXPECT_FALSE(fs::exists(job_dir("cumsum") / "memory.sqlite")) << "no snapshot";
  EXPECT_FALSE(fs::exists(dir_ / "memory.sqlite")) << "the suite's memory is not even opened";
  const std::string script = read_file(job_dir("cumsum") / "job.sh");
  EXPECT_NE(script.find("'task' '/t/cumsum.toml' '--check'"), std::string::npos) << script;
  EXPECT_EQ(script.find("--memory"), std::string::npos) << script;
  EXPECT_EQ(script.find("--devices"), std::string::npos) << "task --check takes no --devices";
  EXPECT_NE(std::find(slurm_->submissions[0].args.begin(), slurm_->submissions[0].args.end(),
                      "--gpus=1"),
            slurm_->submissions[0].args.end())
      << "the check runs with the task's GPUs";
  EXPECT_EQ(nlohmann::json::parse(read_file(job_dir("cumsum") / "job.json")).at("kind"),
            "reference_check");

  // The driver is killed; the next session follows the check job, and only as a check.
  auto slurm = std::make_unique<FakeSlurm>();
  FakeSlurm* still = slurm.get();
  still->set("101", "RUNNING");
  SlurmExecutor resumed(settings_, std::move(slurm));
  EXPECT_FALSE(resumed.adopt_running(launch("cumsum"))) << "not an optimize job";
  ASSERT_TRUE(resumed.adopt_running(check));
  std::ofstream(job_dir("cumsum") / "exit_code") << "0\n";
  still->set("101", "COMPLETED");
  std::vector<TaskEnd> ended = resumed.wait_any();
  ASSERT_EQ(ended.size(), 1u);
  ASSERT_TRUE(ended[0].status);
  EXPECT_EQ(ended[0].status->exit_code, 0);
  EXPECT_EQ(ended[0].note.find("memory"), std::string::npos) << "nothing merged: " << ended[0].note;
  EXPECT_FALSE(fs::exists(dir_ / "memory.sqlite"));
}

TEST(JobArgvForSlurm, TheSuitesMemoryIsReplacedAndGpusBecomeDevices) {
  EXPECT_EQ(
      job_argv({"k", "optimize", "t", "--memory", "/m", "--steps", "1"}, "/j/m.sqlite", 0),
      (std::vector<std::string>{"k", "optimize", "t", "--steps", "1", "--memory", "/j/m.sqlite"}));
  EXPECT_EQ(job_argv({"k", "optimize", "t", "--devices", "3"}, "/j", 2),
            (std::vector<std::string>{"k", "optimize", "t", "--devices", "3", "--memory", "/j"}))
      << "the user's own --devices is kept";
}

}  // namespace
}  // namespace kforge::executor
