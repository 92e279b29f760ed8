#include "worker/crash_retry.h"

#include <deque>

#include <gtest/gtest.h>

namespace kforge::worker {
namespace {

// Answers each call with the next scripted verdict (ok once the script runs out).
class ScriptedWorker : public Worker {
 public:
  DeviceInfo device_info() override { return {}; }
  LoadResult load(const LoadRequest&, double) override { return next<LoadResult>(); }
  RunResult run(const RunRequest&, double) override { return next<RunResult>(); }
  TimeResult time(const TimeRequest&, double) override { return next<TimeResult>(); }
  void shutdown() override {}
  std::deque<Verdict> script;
  int calls = 0;

 private:
  template <typename Result>
  Result next() {
    ++calls;
    Result result;
    if (!script.empty()) {
      result.verdict = script.front();
      result.message = "scripted " + std::string(to_string(script.front()));
      script.pop_front();
    }
    return result;
  }
};

TEST(CrashRetry, ACrashIsRepeatedOnceAndTheRepeatAnswers) {
  ScriptedWorker inner;
  std::vector<std::string> heard;
  CrashRetry worker(inner, [&](const std::string& why) { heard.push_back(why); });
  inner.script = {Verdict::worker_crashed};
  EXPECT_EQ(worker.time({}, 1.0).verdict, Verdict::ok);
  EXPECT_EQ(inner.calls, 2);
  EXPECT_EQ(worker.retries(), 1);
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0], "scripted worker_crashed");
  inner.script = {Verdict::worker_crashed};
  EXPECT_EQ(worker.run({}, 1.0).verdict, Verdict::ok);
  inner.script = {Verdict::worker_crashed};
  EXPECT_EQ(worker.load({}, 1.0).verdict, Verdict::ok);
  EXPECT_EQ(worker.retries(), 3);
}

TEST(CrashRetry, ASecondCrashIsReturnedAndOtherVerdictsAreNotRepeated) {
  ScriptedWorker inner;
  CrashRetry worker(inner);
  inner.script = {Verdict::worker_crashed, Verdict::worker_crashed};
  EXPECT_EQ(worker.time({}, 1.0).verdict, Verdict::worker_crashed);
  EXPECT_EQ(inner.calls, 2);
  inner.script = {Verdict::timeout};
  EXPECT_EQ(worker.time({}, 1.0).verdict, Verdict::timeout);
  inner.script = {Verdict::runtime_error};
  EXPECT_EQ(worker.run({}, 1.0).verdict, Verdict::runtime_error);
  EXPECT_EQ(inner.calls, 4);
  EXPECT_EQ(worker.retries(), 1);
}

}  // namespace
}  // namespace kforge::worker
