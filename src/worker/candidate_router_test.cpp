#include "worker/candidate_router.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.h"

namespace kforge::worker {
namespace {

// Records what reaches it and hands out its own handles from `first_handle`.
class RecordingWorker final : public Worker {
 public:
  explicit RecordingWorker(int first_handle) : next_handle_(first_handle) {}
  DeviceInfo device_info() override {
    DeviceInfo info;
    info.name = "recording";
    return info;
  }
  LoadResult load(const LoadRequest& request, double) override {
    loads.push_back(request);
    LoadResult result;
    result.handle = next_handle_++;
    return result;
  }
  RunResult run(const RunRequest& request, double) override {
    run_handles.push_back(request.handle);
    return {};
  }
  TimeResult time(const TimeRequest& request, double) override {
    time_handles.push_back(request.handle);
    return {};
  }
  void shutdown() override { ++shutdowns; }

  std::vector<LoadRequest> loads;
  std::vector<int> run_handles;
  std::vector<int> time_handles;
  int shutdowns = 0;

 private:
  int next_handle_;
};

TEST(CandidateRouterTest, PythonSourcesGoToThePythonWorkerAndHandlesStayDistinct) {
  RecordingWorker native(1);
  RecordingWorker python(1);  // the same handle numbers as the native worker's
  CandidateRouter router(native, python);
  const int kernel = router.load({"/cache/abc.so"}, 1.0).handle;
  const int model = router.load({"/cache/def.py", "/run/reference.torch.json"}, 1.0).handle;
  ASSERT_NE(kernel, model);
  ASSERT_EQ(native.loads.size(), 1u);
  ASSERT_EQ(python.loads.size(), 1u);
  EXPECT_EQ(python.loads[0].task_path, "/run/reference.torch.json");

  RunRequest run;
  run.handle = model;
  router.run(run, 1.0);
  TimeRequest time;
  time.handle = kernel;
  router.time(time, 1.0);
  EXPECT_EQ(python.run_handles, std::vector<int>{1});
  EXPECT_EQ(native.time_handles, std::vector<int>{1});
  EXPECT_TRUE(native.run_handles.empty());
  EXPECT_EQ(router.device_info().name, "recording");
  router.shutdown();
  EXPECT_EQ(native.shutdowns + python.shutdowns, 2);
}

TEST(CandidateRouterTest, APythonCandidateWithoutATaskIsAVerdictAndAnUnknownHandleAnError) {
  RecordingWorker native(1);
  RecordingWorker python(1);
  CandidateRouter router(native, python);
  const LoadResult refused = router.load({"/cache/def.py"}, 1.0);
  EXPECT_EQ(refused.verdict, Verdict::wrong_signature);
  EXPECT_NE(refused.message.find("no PyTorch reference"), std::string::npos) << refused.message;
  EXPECT_TRUE(python.loads.empty());
  RunRequest run;
  run.handle = 7;
  EXPECT_THROW(router.run(run, 1.0), Error);
}

TEST(CandidateRouterTest, PythonCandidatesAreKnownByTheirExtension) {
  EXPECT_TRUE(is_python_candidate("/cache/0123.py"));
  EXPECT_FALSE(is_python_candidate("/cache/0123.so"));
  EXPECT_FALSE(is_python_candidate(".py"));
  EXPECT_FALSE(is_python_candidate("kernel.pyc"));
}

}  // namespace
}  // namespace kforge::worker
