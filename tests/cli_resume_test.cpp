// End-to-end tests of `kforge optimize --resume` and the budget flags, as a user runs them:
// real compiler, real worker processes, on the cpu backend.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/optimize_resume.h"
#include "common/files.h"
#include "process/subprocess.h"
#include "report/run_database.h"
#include "support/backends.h"
#include "task/task_loader.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

class CliResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_cli_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> environment() const {
    std::vector<std::string> env = {"KFORGE_MEMORY_DB=" + (dir_ / "memory.sqlite").string(),
                                    "KFORGE_CACHE_DIR=" + (dir_ / "cache").string()};
    for (const char* name : {"PATH", "HOME"}) {
      if (const char* value = std::getenv(name)) env.push_back(std::string(name) + "=" + value);
    }
    return env;
  }
  process::CommandResult kforge(std::vector<std::string> args) {
    std::vector<std::string> argv = {"env"};
    for (const std::string& e : environment()) argv.push_back(e);
    argv.push_back(KFORGE_CLI_PATH);
    argv.insert(argv.end(), args.begin(), args.end());
    return process::run_command(argv, 600);
  }
  static std::string task() {
    return (fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml").string();
  }
  std::vector<std::string> optimize_args(const fs::path& run) const {
    // Small: one step of one candidate after the three expert hints.
    return {"optimize", task(), "--backend", "cpu", "--run-dir", run.string(), "--steps", "1",
            "--proposals", "1", "--final-rounds", "2"};
  }
  static int events(const fs::path& run, const std::string& kind) {
    std::ifstream in(run / "events.jsonl");
    int count = 0;
    for (std::string line; std::getline(in, line);) {
      count += line.find("\"event\":\"" + kind + "\"") != std::string::npos;
    }
    return count;
  }

  fs::path dir_;
};

TEST_F(CliResumeTest, ZeroOrNegativeBudgetsAreRefusedAtOnce) {
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--max-wall-s", "0"},
           {"--max-device-s", "-1"},
           {"--max-candidates", "0"},
           {"--max-cost-usd", "-2.5"}}) {
    const fs::path run = dir_ / "run";
    std::vector<std::string> args = optimize_args(run);
    args.insert(args.end(), {flag, value});
    process::CommandResult result = kforge(args);
    EXPECT_EQ(result.exit_code, 2) << flag << "\n" << result.output;
    EXPECT_NE(result.output.find(flag), std::string::npos) << result.output;
    EXPECT_FALSE(fs::exists(run)) << flag;
  }
}

TEST_F(CliResumeTest, BadEtaOrFidelityIsRefusedAtOnce) {
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--eta", "1"}, {"--eta", "0.5"}, {"--eta", "-3"}, {"--eta", "x"},
           {"--fidelity", "flat"}}) {
    const fs::path run = dir_ / "run";
    std::vector<std::string> args = optimize_args(run);
    args.insert(args.end(), {flag, value});
    process::CommandResult result = kforge(args);
    EXPECT_EQ(result.exit_code, 2) << flag << " " << value << "\n" << result.output;
    EXPECT_NE(result.output.find(flag), std::string::npos) << result.output;
    EXPECT_FALSE(fs::exists(run)) << flag;
  }
}

// A whole optimize on two workers (~28 s on 2 cores): `slow` (scripts/test-slow); the pool
// itself is tested in src/search/worker_pool_test.cpp.
class SlowCliResumeTest : public CliResumeTest {};

TEST_F(SlowCliResumeTest, TwoCpuWorkersEvaluateTheCandidatesAndFinishTheRun) {
  const fs::path run = dir_ / "run";
  std::vector<std::string> args = optimize_args(run);
  *(std::find(args.begin(), args.end(), "--proposals") + 1) = "2";
  args.insert(args.end(), {"--workers", "2"});
  process::CommandResult result = kforge(args);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("worker pool: 2 candidate workers"), std::string::npos)
      << result.output;
  const nlohmann::json json = nlohmann::json::parse(read_file(run / "result.json"));
  EXPECT_EQ(json["workers"], 2);
  EXPECT_GT(json["final"]["speedup"]["speedup"].get<double>(), 0.0);
  EXPECT_GT(events(run, "promotion"), 0);
  EXPECT_GT(events(run, "full_rung"), 0);
  // The pool is part of the recorded command, so --resume brings the same workers back.
  const nlohmann::json command =
      *report::RunDatabase::open(run / "run.sqlite")->meta("command");
  EXPECT_EQ(command["workers"], 2);
}

TEST_F(CliResumeTest, BadPoolFlagsAreClearErrors) {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
    int exit_code;
  };
  // A build without the cuda backend refuses the cuda cases earlier, saying so.
  const bool cuda = testing::has_backend("cuda");
  const std::string no_cuda = "the cuda backend is not in this build";
  for (const Case& c : std::vector<Case>{
           {{"--workers", "0"}, "--workers", 2},
           {{"--devices", "0,1"},
            cuda ? "--devices applies to the cuda backend"
                 : "--devices applies to a backend with several devices, and this build has none",
            1},
           {{"--backend", "cuda", "--devices", "0,0"}, cuda ? "device 0 is listed twice" : no_cuda, 1},
           {{"--backend", "cuda", "--workers", "2"},
            cuda ? "--workers applies to the cpu backend" : no_cuda, 1},
           {{"--device", "1", "--devices", "0,1"}, "--device excludes --devices", 2}}) {
    const fs::path run = dir_ / "run";
    std::vector<std::string> args = optimize_args(run);
    for (size_t i = 0; i + 1 < c.flags.size(); i += 2) {
      auto given = std::find(args.begin(), args.end(), c.flags[i]);
      if (given != args.end()) {
        *(given + 1) = c.flags[i + 1];  // --backend: replace the default's cpu
      } else {
        args.insert(args.end(), {c.flags[i], c.flags[i + 1]});
      }
    }
    process::CommandResult result = kforge(args);
    EXPECT_EQ(result.exit_code, c.exit_code) << c.message << "\n" << result.output;
    EXPECT_NE(result.output.find(c.message), std::string::npos) << result.output;
    EXPECT_FALSE(fs::exists(run)) << c.message;
  }
}

TEST_F(CliResumeTest, ResumeOfWhatIsNotARunSaysSoAndTouchesNothing) {
  process::CommandResult missing = kforge({"optimize", "--resume", (dir_ / "nope").string()});
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("no such run directory"), std::string::npos) << missing.output;
  EXPECT_FALSE(fs::exists(dir_ / "nope"));

  fs::create_directories(dir_ / "plain");
  std::ofstream(dir_ / "plain" / "notes.txt") << "mine\n";
  process::CommandResult plain = kforge({"optimize", "--resume", (dir_ / "plain").string()});
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_NE(plain.output.find("not a kforge run directory"), std::string::npos) << plain.output;
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "plain"), fs::directory_iterator()), 1);
}

TEST_F(CliResumeTest, ResumeOfAnotherTaskOrANewerSchemaIsRefused) {
  const fs::path other = dir_ / "other";
  fs::create_directories(other);
  {
    auto db = report::RunDatabase::open(other / "run.sqlite");
    cli::OptimizeCommandOptions options;
    options.task_path = task();
    options.backend = "cpu";
    db->set_meta("command", cli::command_to_json(options));
    db->set_meta("task", "some_other_task");
    db->set_meta("task_hash", "0123abcd");
  }
  const auto size_before = fs::file_size(other / "run.sqlite");
  process::CommandResult result = kforge({"optimize", "--resume", other.string()});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("made for task 'some_other_task' (task hash 0123abcd)"),
            std::string::npos)
      << result.output;
  EXPECT_FALSE(fs::exists(other / "events.jsonl"));
  EXPECT_EQ(fs::file_size(other / "run.sqlite"), size_before);

  const fs::path newer = dir_ / "newer";
  fs::create_directories(newer);
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open((newer / "run.sqlite").c_str(), &raw), SQLITE_OK);
  sqlite3_exec(raw, "CREATE TABLE meta (key TEXT); PRAGMA user_version = 99;", nullptr, nullptr,
               nullptr);
  sqlite3_close(raw);
  process::CommandResult newer_result = kforge({"optimize", "--resume", newer.string()});
  EXPECT_EQ(newer_result.exit_code, 1);
  EXPECT_NE(newer_result.output.find("schema version 99, newer than this kforge supports"),
            std::string::npos)
      << newer_result.output;
}

// A resume whose wall-time or cost limit the earlier sessions already spent would stop before
// replaying anything and replace the run's result with an empty one: it is refused, and the
// run directory is left as it was.
TEST_F(CliResumeTest, ResumeWithABudgetAlreadySpentIsRefusedAndTouchesNothing) {
  const fs::path run = dir_ / "spent";
  fs::create_directories(run);
  {
    auto db = report::RunDatabase::open(run / "run.sqlite");
    cli::OptimizeCommandOptions options;
    options.task_path = task();
    options.backend = "cpu";
    options.search.budget.max_wall_s = 30.0;  // the recorded limit, below what was spent
    db->set_meta("command", cli::command_to_json(options));
    db->set_meta("task", "softmax_small");
    db->set_meta("task_hash", task_hash(load_task(task())));
    db->set_meta("spent", {{"wall_s", 34.4}, {"cost_usd", 0.02}});
  }
  std::ofstream(run / "result.json") << "{\"best\": \"kept\"}\n";
  const auto size_before = fs::file_size(run / "run.sqlite");

  process::CommandResult recorded = kforge({"optimize", "--resume", run.string()});
  EXPECT_EQ(recorded.exit_code, 1) << recorded.output;
  EXPECT_NE(recorded.output.find("already spent 34.4 s of wall time, at or above its limit of 30 s"),
            std::string::npos)
      << recorded.output;
  process::CommandResult given =
      kforge({"optimize", "--resume", run.string(), "--max-wall-s", "5"});
  EXPECT_EQ(given.exit_code, 1) << given.output;
  EXPECT_NE(given.output.find("give a larger --max-wall-s"), std::string::npos) << given.output;
  process::CommandResult cost =
      kforge({"optimize", "--resume", run.string(), "--max-wall-s", "600", "--max-cost-usd",
              "0.01"});
  EXPECT_EQ(cost.exit_code, 1) << cost.output;
  EXPECT_NE(cost.output.find("give a larger --max-cost-usd"), std::string::npos) << cost.output;

  EXPECT_FALSE(fs::exists(run / "events.jsonl"));
  EXPECT_EQ(fs::file_size(run / "run.sqlite"), size_before);
  EXPECT_EQ(read_file(run / "result.json"), "{\"best\": \"kept\"}\n");
}

// A different --steps with --resume is refused before anything is written (the journal replays
// the recorded search and would refuse it later); the recorded count given again is fine.
TEST_F(CliResumeTest, ADifferentStepCountWithResumeIsRefused) {
  const fs::path run = dir_ / "steps";
  fs::create_directories(run);
  {
    auto db = report::RunDatabase::open(run / "run.sqlite");
    cli::OptimizeCommandOptions options;
    options.task_path = task();
    options.backend = "cpu";
    options.search.steps = 2;
    db->set_meta("command", cli::command_to_json(options));
    db->set_meta("task", "softmax_small");
    db->set_meta("task_hash", task_hash(load_task(task())));
  }
  cli::OptimizeCommandOptions given;
  given.resume_dir = run.string();
  given.search.steps = 6;  // the flag's default, not given
  EXPECT_EQ(cli::plan_resume(given).options.search.steps, 2);
  given.given_flags = {"--steps"};
  given.search.steps = 2;
  EXPECT_EQ(cli::plan_resume(given).options.search.steps, 2);
  const auto size_before = fs::file_size(run / "run.sqlite");
  process::CommandResult more = kforge({"optimize", "--resume", run.string(), "--steps", "5"});
  EXPECT_EQ(more.exit_code, 1) << more.output;
  EXPECT_NE(more.output.find("--steps 5 differs from the run's recorded 2"), std::string::npos)
      << more.output;
  EXPECT_FALSE(fs::exists(run / "events.jsonl"));
  EXPECT_EQ(fs::file_size(run / "run.sqlite"), size_before);
}

// Options other than the budget limits given with --resume on the command line must say what
// the run recorded (the resumed run would silently use the recorded ones); the same options
// from environment variables, which may be set for the whole session, are not checked.
TEST_F(CliResumeTest, AChangedOptionGivenWithResumeIsRefused) {
  const fs::path run = dir_ / "options";
  fs::create_directories(run);
  {
    auto db = report::RunDatabase::open(run / "run.sqlite");
    cli::OptimizeCommandOptions options;
    options.task_path = task();
    options.backend = "cpu";
    options.search.seed = 3;
    options.search.budget.max_wall_s = 30.0;
    db->set_meta("command", cli::command_to_json(options));
    db->set_meta("task", "softmax_small");
    db->set_meta("task_hash", task_hash(load_task(task())));
    db->set_meta("spent", {{"wall_s", 34.4}});  // a resume that passes the checks stops here
  }
  const auto size_before = fs::file_size(run / "run.sqlite");
  process::CommandResult changed = kforge({"optimize", "--resume", run.string(), "--seed", "7",
                                           "--policy", "flat", "--backend", "cpu"});
  EXPECT_EQ(changed.exit_code, 1) << changed.output;
  EXPECT_NE(changed.output.find("--seed 7 differs from the run's recorded 3; --policy flat "
                                "differs from the run's recorded htam; a resumed run keeps its "
                                "recorded options except the budget limits"),
            std::string::npos)
      << changed.output;
  EXPECT_EQ(changed.output.find("--backend cpu differs"), std::string::npos) << changed.output;
  process::CommandResult run_dir =
      kforge({"optimize", "--resume", run.string(), "--run-dir", (dir_ / "elsewhere").string()});
  EXPECT_EQ(run_dir.exit_code, 1) << run_dir.output;
  EXPECT_NE(run_dir.output.find("is not the resumed run"), std::string::npos) << run_dir.output;
  process::CommandResult diversity =
      kforge({"optimize", "--resume", run.string(), "--diversity-slots", "0"});
  EXPECT_EQ(diversity.exit_code, 1) << diversity.output;
  EXPECT_NE(diversity.output.find("--diversity-slots 0 differs from the run's recorded 1"),
            std::string::npos)
      << diversity.output;

  // The recorded values given again, and other values from the environment, pass this check
  // (and stop at the spent wall-time limit).
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"optimize", "--resume", run.string(), "--seed", "3"},
        std::vector<std::string>{"env", "KFORGE_SEED=7", "KFORGE_POLICY=flat", KFORGE_CLI_PATH,
                                 "optimize", "--resume", run.string()}}) {
    std::vector<std::string> argv = args;
    if (argv.front() == "optimize") {
      argv.insert(argv.begin(), KFORGE_CLI_PATH);
      argv.insert(argv.begin(), "env");
    }
    const std::vector<std::string> env = environment();
    argv.insert(argv.begin() + 1, env.begin(), env.end());
    process::CommandResult same = process::run_command(argv, 600);
    EXPECT_EQ(same.exit_code, 1) << same.output;
    EXPECT_EQ(same.output.find("differs"), std::string::npos) << same.output;
    EXPECT_NE(same.output.find("already spent 34.4 s of wall time"), std::string::npos)
        << same.output;
  }
  EXPECT_FALSE(fs::exists(run / "events.jsonl"));
  EXPECT_EQ(fs::file_size(run / "run.sqlite"), size_before);
}

// Two writers on one run (a resume started while the interrupted run still times its best) are
// refused: the second names the first's pid and writes nothing.
TEST_F(CliResumeTest, ARunHeldByAnotherProcessIsRefused) {
  const fs::path run = dir_ / "held";
  fs::create_directories(run / "candidates");
  {
    auto db = report::RunDatabase::open(run / "run.sqlite");
    cli::OptimizeCommandOptions options;
    options.task_path = task();
    options.backend = "cpu";
    db->set_meta("command", cli::command_to_json(options));
    db->set_meta("task", "softmax_small");
    db->set_meta("task_hash", task_hash(load_task(task())));
  }
  const int fd = ::open((run / "run.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string pid = std::to_string(::getpid());
  ASSERT_EQ(::pwrite(fd, pid.data(), pid.size(), 0), static_cast<ssize_t>(pid.size()));
  const auto size_before = fs::file_size(run / "run.sqlite");

  process::CommandResult held = kforge({"optimize", "--resume", run.string()});
  ::close(fd);
  EXPECT_EQ(held.exit_code, 1) << held.output;
  EXPECT_NE(held.output.find("is in use by another kforge process (pid " + pid + ")"),
            std::string::npos)
      << held.output;
  EXPECT_FALSE(fs::exists(run / "events.jsonl"));
  EXPECT_FALSE(fs::exists(run / "failed.txt"));
  EXPECT_EQ(fs::file_size(run / "run.sqlite"), size_before);
}

// The user's promise: kill -9 mid-run loses nothing but the candidate in flight.
TEST_F(CliResumeTest, KilledRunResumesToTheEndAndAFinishedRunIsReportedComplete) {
  const fs::path run = dir_ / "run";
  process::SpawnOptions spawn;
  spawn.argv = {KFORGE_CLI_PATH};
  for (const std::string& arg : optimize_args(run)) spawn.argv.push_back(arg);
  spawn.environment = environment();
  spawn.pipe_stdin = false;
  spawn.merge_stderr = true;
  {
    process::Subprocess optimize(spawn);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (events(run, "candidate") < 2 && std::chrono::steady_clock::now() < deadline &&
           !optimize.poll_exit()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_GE(events(run, "candidate"), 2) << "the run ended or stalled before its 2nd candidate";
    optimize.kill();  // SIGKILL to the orchestrator: no handler runs
  }
  ASSERT_FALSE(fs::exists(run / "result.json"));
  const size_t recorded = report::RunDatabase::open(run / "run.sqlite")->candidates().size();
  ASSERT_GE(recorded, 2u);

  process::CommandResult resumed = kforge({"optimize", "--resume", run.string()});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("(replayed)"), std::string::npos) << resumed.output;
  ASSERT_TRUE(fs::exists(run / "result.json"));
  nlohmann::json json = nlohmann::json::parse(read_file(run / "result.json"));
  EXPECT_FALSE(json["best"].is_null());
  EXPECT_GE(json["replayed_candidates"].get<size_t>(), recorded);
  EXPECT_EQ(json["budget"]["stopped_by"], "steps");
  std::set<std::string> ids;
  for (const auto& c : json["candidates"]) ids.insert(c["id"].get<std::string>());
  EXPECT_EQ(ids.size(), json["candidates"].size());  // no candidate twice
  EXPECT_EQ(events(run, "run_resumed"), 1);

  process::CommandResult again = kforge({"optimize", "--resume", run.string()});
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("is complete: nothing to resume"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("speedup:"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("stopped by steps"), std::string::npos) << again.output;
}

}  // namespace
}  // namespace kforge
