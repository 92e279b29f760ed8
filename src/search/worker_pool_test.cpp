#include "search/worker_pool.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "common/error.h"
#include "search/optimizer_test_util.h"

namespace kforge::search {
namespace {

using fakes::FakeWorker;

TEST(WorkerPool, EveryJobRunsOnceAndAWorkerServesOneJobAtATime) {
  FakeWorker a, b, c;
  WorkerPool pool({&a, &b, &c});
  std::mutex mutex;
  std::vector<int> runs(12, 0);
  std::set<size_t> workers_used;
  std::vector<std::atomic<int>> busy(3);
  std::atomic<bool> overlapped_on_one_worker{false};
  std::atomic<int> running{0}, max_running{0};
  const std::vector<bool> ran = pool.run(12, [&](size_t job, size_t worker) {
    if (busy[worker].fetch_add(1) != 0) overlapped_on_one_worker = true;
    const int now = running.fetch_add(1) + 1;
    for (int seen = max_running.load(); now > seen && !max_running.compare_exchange_weak(seen, now);) {
    }
    // Different latencies per job: later jobs finish before earlier ones.
    std::this_thread::sleep_for(std::chrono::milliseconds(job % 3 == 0 ? 30 : 5));
    running.fetch_sub(1);
    busy[worker].fetch_sub(1);
    std::lock_guard<std::mutex> lock(mutex);
    ++runs[job];
    workers_used.insert(worker);
  });
  EXPECT_EQ(ran, std::vector<bool>(12, true));
  EXPECT_EQ(runs, std::vector<int>(12, 1));
  EXPECT_FALSE(overlapped_on_one_worker);
  EXPECT_EQ(workers_used.size(), 3u);
  EXPECT_EQ(max_running.load(), 3);  // concurrent, one per worker
}

TEST(WorkerPool, KeepGoingStopsStartingJobsAndErrorsComeBackByJobIndex) {
  FakeWorker a, b;
  WorkerPool pool({&a, &b});
  int allowed = 3;
  const std::vector<bool> ran =
      pool.run(10, [](size_t, size_t) {}, [&] { return allowed-- > 0; });
  EXPECT_EQ(std::count(ran.begin(), ran.end(), true), 3);
  EXPECT_TRUE(ran[0] && ran[1] && ran[2]);  // the lowest indexes start first
  try {
    pool.run(4, [](size_t job, size_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(job == 1 ? 20 : 1));
      if (job >= 1) throw Error("job " + std::to_string(job));
    });
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "job 1");
  }
  EXPECT_THROW(WorkerPool({}), Error);
}

TEST(WorkerPool, OneWorkerRunsOnTheCallersThread) {
  FakeWorker a;
  WorkerPool pool({&a});
  const std::thread::id caller = std::this_thread::get_id();
  pool.run(3, [&](size_t, size_t worker) {
    EXPECT_EQ(worker, 0u);
    EXPECT_EQ(std::this_thread::get_id(), caller);
  });
}

}  // namespace
}  // namespace kforge::search
