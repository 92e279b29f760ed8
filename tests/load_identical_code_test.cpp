// Identical code is a tie at every rung on a loaded machine (issue 21). A real `kforge optimize`
// on the cpu backend (real compiler and workers) whose every candidate is the reference's own
// code: step 0's reference-seed (the llm generator's first candidate is the task's native
// reference), then copies the loopback model answers, each with an unused #define of its own
// so that duplicate detection does not fold them (duplicates.h keeps preprocessor lines) while
// the machine code stays the reference's. The test loads every core on purpose for the whole
// run: 3 busy loops per core until the run has timed its start-of-run reference, 1 per core
// after (other engineers' builds on the shared machine add their own). A rung that compared a
// candidate with a reference timed at another moment would see the copies faster or slower
// than the reference by the change of load (the 2.17x; 0.2-0.3x in the runs of
// bench/ladder/identical_cpu.md). The assertions: acceptance, rung 2's challenges and the final
// rung judge every copy a tie (their intervals reach past 1 +- min_gain both ways); rung 1's
// window, two processes over one short window, has its interval include 1 or its speedup within
// kRung1Band of it, and S(p, 1) not above 1 + kRung1Band; no copy replaces the reference-seed;
// and S(p, 1) is scored over each candidate's window reference samples (it fails if rung 1 goes
// back to the start-of-run reference).
//
// Minutes of loaded cores: skipped unless KFORGE_LOAD_TEST=1, labelled `load` (CI skips the
// label); bench/ladder/identical.sh runs it and records its numbers (KFORGE_LOAD_RESULT names
// the JSON file the test writes them to).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>
#include <vector>

#include "common/files.h"
#include "process/subprocess.h"
#include "search/scheduler.h"
#include "support/fake_openai_server.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;
using testing::FakeOpenAiServer;
using testing::ScriptedReply;

/// Busy-loop processes, one core's worth each; killed (by pid) when resized down or destroyed.
class BusyLoops {
 public:
  BusyLoops() = default;
  BusyLoops(const BusyLoops&) = delete;
  BusyLoops& operator=(const BusyLoops&) = delete;
  ~BusyLoops() { resize(0); }

  void resize(size_t count) {
    while (pids_.size() < count) {
      const pid_t pid = ::fork();
      if (pid == 0) spin();
      if (pid > 0) pids_.push_back(pid);
      if (pid < 0) break;
    }
    while (pids_.size() > count) {
      ::kill(pids_.back(), SIGKILL);
      ::waitpid(pids_.back(), nullptr, 0);
      pids_.pop_back();
    }
  }

 private:
  [[noreturn]] static void spin() {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
    // Hold no descriptor of the parent's (a pipe to kforge's output would never see EOF).
    for (int fd = 0; fd < 4096; ++fd) ::close(fd);
    volatile uint64_t counter = 0;
    for (;;) counter = counter + 1;
  }

  std::vector<pid_t> pids_;
};

/// The loopback model: picks the first strategy it is offered, and answers every kernel request
/// with the reference's source under a #define of its own.
class CopyingModel {
 public:
  explicit CopyingModel(std::string reference) : reference_(std::move(reference)) {}
  ScriptedReply operator()(const nlohmann::json& request) {
    const std::string last = request["messages"].back()["content"];
    if (last.find("Candidate strategies under this direction") != std::string::npos) {
      std::smatch match;
      const std::regex first_id("one of: ([A-Za-z0-9_]+)");
      const std::string id = std::regex_search(last, match, first_id) ? match[1].str() : "x";
      return ScriptedReply::answer("{\"strategy_id\": \"" + id + "\", \"reason\": \"scripted\"}");
    }
    return ScriptedReply::answer("The reference itself, unchanged.\n\n```cpp\n#define KFORGE_COPY_" +
                                 std::to_string((*copies_)++) + " 1\n" + reference_ + "```\n");
  }

 private:
  std::string reference_;
  std::shared_ptr<int> copies_ = std::make_shared<int>(0);
};

// Rung 1 compares two worker processes over one short window; on the 2-core VM identical code
// measured up to 7% apart there with intervals of +-2-4% (bench/ladder/identical_cpu.md: the
// reference's rounds and the candidate's timing meet the busy loops differently), so the
// acceptance band (min_gain, 1%) is too narrow for it. 10% is well below what a reference timed
// at another moment of these runs gave (1.4-20x).
constexpr double kRung1Band = 0.10;

std::vector<nlohmann::json> events_of(const fs::path& run, const std::string& kind) {
  std::vector<nlohmann::json> found;
  std::ifstream in(run / "events.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
    if (!event.is_discarded() && event.value("event", "") == kind) found.push_back(event);
  }
  return found;
}

TEST(LoadIdenticalCode, IsATieAtEveryRungWhileTheLoadChanges) {
  if (std::getenv("KFORGE_LOAD_TEST") == nullptr) {
    GTEST_SKIP() << "loads every core for minutes: set KFORGE_LOAD_TEST=1 "
                    "(bench/ladder/identical.sh)";
  }
  const fs::path dir = fs::temp_directory_path() / "kforge_load_identical";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path run = dir / "run";
  const fs::path task = fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml";
  FakeOpenAiServer server;
  server.set_responder(
      CopyingModel(read_file(fs::path(KFORGE_SOURCE_DIR) / "examples/softmax/reference.cpp")));
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const std::vector<std::string> argv = {
      "env", "KFORGE_MEMORY_DB=" + (dir / "memory.sqlite").string(),
      "KFORGE_CACHE_DIR=" + (dir / "cache").string(),
      "XDG_CONFIG_HOME=" + (dir / "config").string(),
      "KFORGE_LLM_BASE_URL=" + server.base_url(), "KFORGE_LLM_MODEL=kforge-fake",
      "KFORGE_LLM_API_KEY=unused", KFORGE_CLI_PATH, "optimize", task.string(), "--backend", "cpu",
      "--generator", "llm", "--run-dir", run.string(), "--steps", "2", "--proposals", "2",
      "--explain"};

  BusyLoops load;
  load.resize(3 * cores);
  process::CommandResult result;
  std::thread optimize([&] { result = process::run_command(argv, 1400); });
  // Heavy load until the start-of-run reference is timed, then one busy loop per core.
  const auto started = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - started < std::chrono::minutes(20)) {
    if (fs::exists(run / "events.jsonl") &&
        read_file(run / "events.jsonl").find("\"reference_timed\"") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  load.resize(cores);
  optimize.join();
  load.resize(0);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  if (std::getenv("KFORGE_TEST_VERBOSE")) std::fprintf(stderr, "%s\n", result.output.c_str());

  const nlohmann::json json = nlohmann::json::parse(read_file(run / "result.json"));
  const std::vector<nlohmann::json> reference_timed = events_of(run, "reference_timed");
  ASSERT_EQ(reference_timed.size(), 1u);
  const double start_reference_ms = reference_timed[0]["median_ms"];
  nlohmann::json record = {{"cores", cores},
                           {"start_reference_ms", start_reference_ms},
                           {"rung1", nlohmann::json::array()},
                           {"acceptance", events_of(run, "acceptance")},
                           {"rung2", nlohmann::json::array()},
                           {"final_challenge", events_of(run, "final_challenge")},
                           {"final", json["final"]["speedup"]},
                           {"best", json["best"]["id"]},
                           {"wall_s", json["wall_s"]}};
  int timed = 0;
  for (const nlohmann::json& c : json["candidates"]) {
    if (c["verdict"] != "ok" || !c["duplicate_of"].is_null()) continue;
    ++timed;
    SCOPED_TRACE(c["id"].get<std::string>());
    ASSERT_TRUE(c["quick_reference"].is_object()) << c.dump(2);
    const nlohmann::json& window = c["quick_reference"];
    const double median_ms = c["median_ms"];
    const nlohmann::json evaluation = nlohmann::json::parse(
        read_file(fs::path(c["source"].get<std::string>()).parent_path() / "evaluation.json"));
    const std::vector<double> samples_ms = evaluation["samples_ms"];
    record["rung1"].push_back({{"id", c["id"]},
                               {"median_ms", median_ms},
                               {"window_reference_ms", window["median_ms"]},
                               {"speedup", window["speedup"]},
                               {"outcome", window["outcome"]},
                               {"quick_score", c["quick_score"]},
                               {"start_reference_speedup", start_reference_ms / median_ms},
                               {"start_reference_score",
                                search::quick_score(samples_ms, start_reference_ms)},
                               {"window_s", window["seconds"]},
                               {"window_rounds", window["rounds_ms"].size()},
                               {"device_s", c["device_s"]}});
    if (!c["full_geomean_speedup"].is_null()) {
      record["rung2"].push_back({{"id", c["id"]}, {"geomean_speedup", c["full_geomean_speedup"]}});
    }
    // Rung 1: no significant win or loss beyond the band: the window's interval includes 1,
    // or its speedup is within kRung1Band of 1; S(p, 1), a lower bound of that speedup, is not
    // above 1 + kRung1Band; and S is scored over the window's reference samples, not over the
    // start-of-run reference (which this run's change of load moved away from it).
    const nlohmann::json& speedup = window["speedup"];
    const bool includes_one = speedup["ci_low"] <= 1.0 && speedup["ci_high"] >= 1.0;
    EXPECT_TRUE(includes_one || std::abs(std::log(speedup["speedup"].get<double>())) <=
                                    std::log(1.0 + kRung1Band))
        << window.dump(2);
    EXPECT_LE(c["quick_score"].get<double>(), 1.0 + kRung1Band);
    std::vector<double> reference_ms;
    for (const std::vector<double>& round : window["rounds_ms"]) {
      reference_ms.insert(reference_ms.end(), round.begin(), round.end());
    }
    EXPECT_DOUBLE_EQ(c["quick_score"].get<double>(), search::quick_score(samples_ms, reference_ms));
  }
  EXPECT_GE(timed, 4);  // reference-seed and at least three copies
  if (const char* out = std::getenv("KFORGE_LOAD_RESULT")) {
    std::ofstream(out) << record.dump(2) << "\n";
  }
  // Acceptance (a copy whose quick speedup looked higher than the best's, timed with it in
  // interleaved rounds) and rung 2's challenges (a copy with a higher rung-2 geomean, timed
  // again with the best in ABBA order): ties.
  for (const nlohmann::json& event : record["acceptance"]) {
    EXPECT_EQ(event["outcome"], "tie") << event.dump(2);
  }
  for (const nlohmann::json& event : record["final_challenge"]) {
    EXPECT_EQ(event["outcome"], "tie") << event.dump(2);
  }
  // No copy replaced the reference-seed, and the final rung (it and the reference in
  // interleaved rounds) is a tie: its interval reaches past 1 + min_gain either way.
  EXPECT_EQ(json["best"]["id"], "reference-seed");
  const nlohmann::json& final = json["final"]["speedup"];
  EXPECT_LE(final["ci_low"].get<double>(), 1.01) << final.dump(2);
  EXPECT_GE(final["ci_high"].get<double>(), 1.0 / 1.01) << final.dump(2);
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace kforge
