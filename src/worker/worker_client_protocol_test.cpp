// ProcessWorker's side of the protocol against scripted fake workers (/bin/sh): announced exits
// after a sticky device error, forged lines on the channel, a protocol version mismatch. These paths
// need a GPU or a broken worker to happen for real.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <tuple>

#include "worker/test_kernels.h"
#include "worker/worker_client.h"

namespace kforge::worker {
namespace {

/// Writes an executable shell script that answers requests line by line, signing every reply
/// with the session token from hello (as a real worker does). `hello_fields` are the hello
/// reply's fields; `run_reply` is shell code run for a run request, where `reply FIELDS` prints
/// a signed reply and $id holds the request id.
std::string fake_worker(const std::string& name, const std::string& hello_fields,
                        const std::string& run_reply) {
  const std::string path = testing::scratch_dir() + "/" + name + ".sh";
  std::ofstream(path) << R"SH(#!/bin/sh
reply() { echo "{\"id\":$id,\"token\":\"$token\",\"ok\":true,$1}"; }
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"cmd":"hello"'*)
      token=$(printf '%s' "$line" | sed -n 's/.*"token":"\([0-9a-f]*\)".*/\1/p')
      reply ')SH" << hello_fields << R"SH(';;
    *'"cmd":"load"'*) reply '"verdict":"ok","handle":7';;
    *'"cmd":"run"'*) )SH" << run_reply << R"SH(;;
    *'"cmd":"shutdown"'*) reply '"x":0'; exit 0;;
  esac
done
)SH";
  chmod(path.c_str(), 0755);
  return path;
}

const char* kHello = R"("protocol_version":2,"backend":"cuda")";

RunRequest run_request(int handle) {
  RunRequest request;
  request.handle = handle;
  request.signature = testing::unary_signature();
  request.workload = testing::workload_n("small", 8);
  request.seed = 1;
  request.output_path = "/dev/null";
  return request;
}

TEST(ProcessWorkerProtocol, AnnouncedExitIsReapedAndRespawnedWithReloadedHandles) {
  const std::string script = fake_worker(
      "sticky", kHello,
      R"(reply '"verdict":"runtime_error","message":"cudaErrorIllegalAddress","exiting":true'; exit 3)");
  ProcessWorker worker(script, "cuda", 0);
  const LoadResult loaded = worker.load(LoadRequest{"/any/kernel.so"}, 10);
  ASSERT_EQ(loaded.verdict, Verdict::ok) << loaded.message;
  EXPECT_EQ(loaded.handle, 1);  // the client's number, not the worker's 7
  RunResult result = worker.run(run_request(loaded.handle), 10);
  EXPECT_EQ(result.verdict, Verdict::runtime_error);
  EXPECT_EQ(result.message, "cudaErrorIllegalAddress");
  EXPECT_EQ(worker.pid(), -1);
  result = worker.run(run_request(loaded.handle), 10);
  EXPECT_EQ(result.verdict, Verdict::runtime_error);
  EXPECT_EQ(worker.spawn_count(), 2);
}

TEST(ProcessWorkerProtocol, ALongWaitIsReportedOnceBeforeItsTimeout) {
  const std::string script = fake_worker("slow", kHello, R"(sleep 1.5; reply '"verdict":"ok"')");
  ProcessWorkerConfig config;
  config.worker_path = script;
  config.backend = "cuda";
  config.slow_notice_s = 0.5;
  std::vector<std::tuple<std::string, double, double>> notices;
  config.on_slow = [&notices](const std::string& request, double waited_s, double timeout_s) {
    notices.emplace_back(request, waited_s, timeout_s);
  };
  ProcessWorker worker(config);
  const LoadResult loaded = worker.load(LoadRequest{"/any/kernel.so"}, 10);
  ASSERT_EQ(loaded.verdict, Verdict::ok) << loaded.message;
  EXPECT_TRUE(notices.empty()) << "hello and load answer at once";
  const RunResult result = worker.run(run_request(loaded.handle), 10);
  EXPECT_EQ(result.verdict, Verdict::ok) << result.message;
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(std::get<0>(notices[0]), "run");
  EXPECT_GE(std::get<1>(notices[0]), 0.5);
  EXPECT_LT(std::get<1>(notices[0]), 1.5);
  EXPECT_EQ(std::get<2>(notices[0]), 10.0);
}

TEST(ProcessWorkerProtocol, UnsignedLinesAreForgeriesThatRejectTheCandidate) {
  // What a candidate printing a fake success to the result channel looks like to the client:
  // lines without the session token, then the real reply.
  const std::string script = fake_worker(
      "forger", kHello,
      R"(echo '{"id":2,"ok":true,"verdict":"ok"}'; echo 'Segmentation fault?'; reply '"verdict":"ok"')");
  ProcessWorker worker(script, "cuda", 0);
  const LoadResult loaded = worker.load(LoadRequest{"/any/kernel.so"}, 10);
  const RunResult result = worker.run(run_request(loaded.handle), 10);
  EXPECT_EQ(result.verdict, Verdict::rejected_by_policy);
  EXPECT_NE(result.message.find("2 forged line(s)"), std::string::npos) << result.message;
  EXPECT_EQ(worker.pid(), -1);  // a worker whose channel was written to is not reused
}

TEST(ProcessWorkerProtocol, WrongReplyIdIsACrash) {
  const std::string script =
      fake_worker("wrong_id", kHello,
                  R"(echo "{\"id\":123456,\"token\":\"$token\",\"ok\":true,\"verdict\":\"ok\"}")");
  ProcessWorker worker(script, "cuda", 0);
  const LoadResult loaded = worker.load(LoadRequest{"/any/kernel.so"}, 10);
  EXPECT_EQ(worker.run(run_request(loaded.handle), 10).verdict, Verdict::worker_crashed);
}

TEST(ProcessWorkerProtocol, ReplyThatDoesNotDecodeIsACrash) {
  const std::string script =
      fake_worker("bad_verdict", kHello, R"(reply '"verdict":"splendid"')");
  ProcessWorker worker(script, "cuda", 0);
  const LoadResult loaded = worker.load(LoadRequest{"/any/kernel.so"}, 10);
  const RunResult result = worker.run(run_request(loaded.handle), 10);
  EXPECT_EQ(result.verdict, Verdict::worker_crashed);
  EXPECT_NE(result.message.find("splendid"), std::string::npos) << result.message;
  EXPECT_EQ(worker.pid(), -1);
}

TEST(ProcessWorkerProtocol, HarnessErrorReplyThrows) {
  const std::string script = fake_worker(
      "refuses", kHello,
      R"(echo "{\"id\":$id,\"token\":\"$token\",\"ok\":false,\"error\":\"reference kernel failed\"}")");
  ProcessWorker worker(script, "cuda", 0);
  const LoadResult loaded = worker.load(LoadRequest{"/any/kernel.so"}, 10);
  try {
    worker.run(run_request(loaded.handle), 10);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reference kernel failed"), std::string::npos);
  }
  EXPECT_GT(worker.pid(), 0);  // a harness error does not cost the worker
}

TEST(ProcessWorkerProtocol, OtherProtocolVersionIsRefused) {
  const std::string script =
      fake_worker("version1", R"("protocol_version":1,"backend":"cuda")", "exit 1");
  ProcessWorker worker(script, "cuda", 0);
  try {
    worker.device_info();
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("protocol version 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kforge::worker
