// ProcessWorker's side of the protocol against scripted fake workers (/bin/sh): announced exits
// after a sticky device error, garbage on the channel, a protocol version mismatch. These paths
// need a GPU or a broken worker to happen for real.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "worker/test_kernels.h"
#include "worker/worker_client.h"

namespace kforge::worker {
namespace {

/// Writes an executable shell script that answers requests line by line; `check_reply` is the
/// shell code run for a check request ($id holds the request id).
std::string fake_worker(const std::string& name, const std::string& hello_fields,
                        const std::string& check_reply) {
  const std::string path = testing::scratch_dir() + "/" + name + ".sh";
  std::ofstream(path)
      << "#!/bin/sh\n"
         "while IFS= read -r line; do\n"
         "  id=$(printf '%s' \"$line\" | sed -n 's/.*\"id\":\\([0-9]*\\).*/\\1/p')\n"
         "  case \"$line\" in\n"
         "    *'\"cmd\":\"hello\"'*) echo \"{\\\"id\\\":$id,\\\"ok\\\":true,"
      << hello_fields
      << "}\";;\n"
         "    *'\"cmd\":\"load\"'*) echo \"{\\\"id\\\":$id,\\\"ok\\\":true,"
         "\\\"verdict\\\":\\\"ok\\\",\\\"handle\\\":7}\";;\n"
         "    *'\"cmd\":\"check\"'*) "
      << check_reply
      << ";;\n"
         "    *'\"cmd\":\"shutdown\"'*) echo \"{\\\"id\\\":$id,\\\"ok\\\":true}\"; "
         "exit 0;;\n"
         "  esac\n"
         "done\n";
  chmod(path.c_str(), 0755);
  return path;
}

const char* kHelloV1 = "\\\"protocol_version\\\":1,\\\"backend\\\":\\\"cuda\\\"";

CheckRequest check_request(int handle) {
  CheckRequest request;
  request.candidate_handle = handle;
  request.reference_handle = handle;
  request.signature = testing::unary_signature();
  request.workloads = {testing::workload_n("small", 8)};
  request.seeds = {1};
  return request;
}

TEST(ProcessWorkerProtocol, AnnouncedExitIsReapedAndRespawnedWithReloadedHandles) {
  const std::string script = fake_worker(
      "sticky", kHelloV1,
      "echo \"{\\\"id\\\":$id,\\\"ok\\\":true,\\\"verdict\\\":\\\"runtime_error\\\","
      "\\\"message\\\":\\\"cudaErrorIllegalAddress\\\",\\\"exiting\\\":true}\"; exit 3");
  ProcessWorker worker(script, "cuda", 0);
  const LoadResult loaded = worker.load(LoadRequest{"/any/kernel.so"}, 10);
  ASSERT_EQ(loaded.verdict, Verdict::ok) << loaded.message;
  EXPECT_EQ(loaded.handle, 1);  // the client's number, not the worker's 7
  CheckResult result = worker.check(check_request(loaded.handle), 10);
  EXPECT_EQ(result.verdict, Verdict::runtime_error);
  EXPECT_EQ(result.message, "cudaErrorIllegalAddress");
  EXPECT_EQ(worker.pid(), -1);
  result = worker.check(check_request(loaded.handle), 10);
  EXPECT_EQ(result.verdict, Verdict::runtime_error);
  EXPECT_EQ(worker.spawn_count(), 2);
}

TEST(ProcessWorkerProtocol, GarbageOnTheChannelIsACrash) {
  const std::string script = fake_worker("garbage", kHelloV1, "echo 'Segmentation fault?'");
  ProcessWorker worker(script, "cuda", 0);
  const LoadResult loaded = worker.load(LoadRequest{"/any/kernel.so"}, 10);
  const CheckResult result = worker.check(check_request(loaded.handle), 10);
  EXPECT_EQ(result.verdict, Verdict::worker_crashed);
  EXPECT_NE(result.message.find("garbage"), std::string::npos) << result.message;
  EXPECT_EQ(worker.pid(), -1);
}

TEST(ProcessWorkerProtocol, WrongReplyIdIsACrash) {
  const std::string script =
      fake_worker("wrong_id", kHelloV1,
                  "echo \"{\\\"id\\\":123456,\\\"ok\\\":true,\\\"verdict\\\":\\\"ok\\\"}\"");
  ProcessWorker worker(script, "cuda", 0);
  const LoadResult loaded = worker.load(LoadRequest{"/any/kernel.so"}, 10);
  EXPECT_EQ(worker.check(check_request(loaded.handle), 10).verdict, Verdict::worker_crashed);
}

TEST(ProcessWorkerProtocol, ReplyThatDoesNotDecodeIsACrash) {
  const std::string script =
      fake_worker("bad_verdict", kHelloV1,
                  "echo \"{\\\"id\\\":$id,\\\"ok\\\":true,\\\"verdict\\\":\\\"splendid\\\"}\"");
  ProcessWorker worker(script, "cuda", 0);
  const LoadResult loaded = worker.load(LoadRequest{"/any/kernel.so"}, 10);
  const CheckResult result = worker.check(check_request(loaded.handle), 10);
  EXPECT_EQ(result.verdict, Verdict::worker_crashed);
  EXPECT_NE(result.message.find("splendid"), std::string::npos) << result.message;
  EXPECT_EQ(worker.pid(), -1);
}

TEST(ProcessWorkerProtocol, HarnessErrorReplyThrows) {
  const std::string script = fake_worker(
      "refuses", kHelloV1,
      "echo \"{\\\"id\\\":$id,\\\"ok\\\":false,\\\"error\\\":\\\"reference kernel failed\\\"}\"");
  ProcessWorker worker(script, "cuda", 0);
  const LoadResult loaded = worker.load(LoadRequest{"/any/kernel.so"}, 10);
  try {
    worker.check(check_request(loaded.handle), 10);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reference kernel failed"), std::string::npos);
  }
  EXPECT_GT(worker.pid(), 0);  // a harness error does not cost the worker
}

TEST(ProcessWorkerProtocol, OtherProtocolVersionIsRefused) {
  const std::string script =
      fake_worker("version2", "\\\"protocol_version\\\":2,\\\"backend\\\":\\\"cuda\\\"", "exit 1");
  ProcessWorker worker(script, "cuda", 0);
  try {
    worker.device_info();
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("protocol version 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kforge::worker
