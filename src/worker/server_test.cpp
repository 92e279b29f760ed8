// The worker's request handling in-process (cpu backend): envelopes, errors, load verdicts.
#include "worker/server.h"

#include <gtest/gtest.h>

#include <fstream>

#include "backends/backend.h"
#include "worker/test_kernels.h"

namespace kforge::worker {
namespace {

using nlohmann::json;
using testing::build_cpu_kernel;
using testing::cpu_unary_kernel;

class ServerTest : public ::testing::Test {
 protected:
  json ask(const json& request) { return json::parse(server_.handle_line(request.dump())); }
  Server server_{backends::make_device_backend("cpu", 0)};
};

TEST_F(ServerTest, HelloDescribesTheDeviceAndEveryReplyCarriesTheToken) {
  const json reply = ask({{"cmd", "hello"}, {"id", 1}, {"token", "0123abcd"}, {"measure", true}});
  EXPECT_EQ(reply.at("ok"), true);
  EXPECT_EQ(reply.at("id"), 1);
  EXPECT_EQ(reply.at("token"), "0123abcd");
  EXPECT_GT(reply.at("copy_bytes_per_s").get<double>(), 1e8);  // measured: > 100 MB/s anywhere
  EXPECT_EQ(ask({{"cmd", "explode"}, {"id", 2}}).at("token"), "0123abcd");
  EXPECT_EQ(reply.at("protocol_version"), kProtocolVersion);
  EXPECT_EQ(reply.at("backend"), "cpu");
  EXPECT_GT(reply.at("multiprocessor_count").get<int>(), 0);
  EXPECT_FALSE(reply.contains("exiting"));
}

TEST_F(ServerTest, MalformedRequestsAreErrorsNotCrashes) {
  json reply = json::parse(server_.handle_line("{not json"));
  EXPECT_EQ(reply.at("ok"), false);
  EXPECT_TRUE(reply.at("id").is_null());
  reply = ask({{"cmd", "explode"}, {"id", 2}});
  EXPECT_EQ(reply.at("ok"), false);
  EXPECT_NE(reply.at("error").get<std::string>().find("explode"), std::string::npos);
  reply = ask({{"cmd", "run"}, {"id", 3}});  // fields missing
  EXPECT_EQ(reply.at("ok"), false);
  EXPECT_EQ(reply.at("id"), 3);
  reply = json::parse(server_.handle_line("[1, 2]"));
  EXPECT_EQ(reply.at("ok"), false);
}

TEST_F(ServerTest, UnknownHandleIsAnError) {
  RunRequest request;
  request.handle = 41;
  request.output_path = "/dev/null";
  json body = request;
  body["cmd"] = "run";
  body["id"] = 9;
  const json reply = ask(body);
  EXPECT_EQ(reply.at("ok"), false);
  EXPECT_NE(reply.at("error").get<std::string>().find("unknown kernel handle"), std::string::npos);
}

TEST_F(ServerTest, CompileBaselineIsForTheTorchWorkerOnly) {
  TimeRequest request;
  request.handle = 1;
  request.baseline = "compile";
  json body = request;
  body["cmd"] = "time";
  body["id"] = 10;
  const json reply = ask(body);
  EXPECT_EQ(reply.at("ok"), false);
  EXPECT_NE(reply.at("error").get<std::string>().find(
                "baseline 'compile' is served by the torch reference worker only"),
            std::string::npos)
      << reply.dump();
}

TEST_F(ServerTest, LoadChecksTheEntryPointAndAbi) {
  const std::string good = build_cpu_kernel("server_good", cpu_unary_kernel(""));
  json reply = ask({{"cmd", "load"}, {"id", 1}, {"path", good}});
  EXPECT_EQ(reply.at("verdict"), "ok");
  EXPECT_GE(reply.at("handle").get<int>(), 1);

  const std::string no_entry =
      build_cpu_kernel("server_no_entry", "extern \"C\" int kforge_launch() { return 0; }\n");
  reply = ask({{"cmd", "load"}, {"id", 2}, {"path", no_entry}});
  EXPECT_EQ(reply.at("ok"), true);
  EXPECT_EQ(reply.at("verdict"), "wrong_signature");
  EXPECT_NE(reply.at("message").get<std::string>().find("kforge_run"), std::string::npos);
  EXPECT_EQ(reply.at("handle"), -1);

  // Built without kernel.h, claiming another ABI version.
  const std::string other_abi =
      build_cpu_kernel("server_other_abi",
                       "extern \"C\" int kforge_run(const void*) { return 0; }\n"
                       "extern \"C\" int kforge_abi_version() { return 99; }\n");
  reply = ask({{"cmd", "load"}, {"id", 3}, {"path", other_abi}});
  EXPECT_EQ(reply.at("verdict"), "wrong_signature");
  EXPECT_NE(reply.at("message").get<std::string>().find("version 99"), std::string::npos);

  // Without the (optional) ABI tag the kernel is accepted.
  const std::string untagged = build_cpu_kernel(
      "server_untagged", "extern \"C\" int kforge_run(const void*) { return 0; }\n");
  EXPECT_EQ(ask({{"cmd", "load"}, {"id", 4}, {"path", untagged}}).at("verdict"), "ok");

  const std::string not_elf = testing::scratch_dir() + "/not_elf.so";
  std::ofstream(not_elf) << "hello";
  reply = ask({{"cmd", "load"}, {"id", 5}, {"path", not_elf}});
  EXPECT_EQ(reply.at("verdict"), "wrong_signature");
  EXPECT_NE(reply.at("message").get<std::string>().find("cannot load"), std::string::npos);
}

TEST_F(ServerTest, UnloadForgetsAHandle) {
  const std::string path = build_cpu_kernel(
      "server_unloaded", "extern \"C\" int kforge_run(const void*) { return 0; }\n");
  const json loaded = ask({{"cmd", "load"}, {"id", 1}, {"path", path}});
  ASSERT_EQ(loaded.at("verdict"), "ok");
  const int handle = loaded.at("handle").get<int>();
  EXPECT_EQ(ask({{"cmd", "unload"}, {"id", 2}, {"handle", handle}}).at("ok"), true);
  const json again = ask({{"cmd", "unload"}, {"id", 3}, {"handle", handle}});
  EXPECT_EQ(again.at("ok"), false);
  EXPECT_NE(again.at("error").get<std::string>().find("unknown kernel handle"), std::string::npos);
}

TEST_F(ServerTest, ShutdownEndsTheServeLoop) {
  EXPECT_FALSE(server_.should_exit());
  EXPECT_EQ(ask({{"cmd", "shutdown"}, {"id", 7}}).at("ok"), true);
  EXPECT_TRUE(server_.should_exit());
  EXPECT_EQ(server_.exit_code(), 0);
}

/// The cpu backend, except that the n-th synchronize reports a sticky device error (what an
/// illegal address does on cuda), after which the device stays lost.
class StickyFailureBackend final : public DeviceBackend {
 public:
  explicit StickyFailureBackend(int failing_sync) : failing_sync_(failing_sync) {}
  DeviceInfo info() const override { return cpu_->info(); }
  DLDevice dl_device() const override { return cpu_->dl_device(); }
  void* stream() const override { return nullptr; }
  void* allocate(int64_t bytes) override { return cpu_->allocate(bytes); }
  void release(void* data) noexcept override { cpu_->release(data); }
  void copy_to_device(void* dst, const void* src, int64_t bytes) override {
    cpu_->copy_to_device(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, int64_t bytes) override {
    cpu_->copy_to_host(dst, src, bytes);
  }
  void fill_bytes(void* dst, uint8_t value, int64_t bytes) override {
    cpu_->fill_bytes(dst, value, bytes);
  }
  void synchronize() override {
    if (++syncs_ >= failing_sync_) {
      lost_ = true;
      throw DeviceError("cudaDeviceSynchronize: cudaErrorIllegalAddress (fake)", true);
    }
  }
  void flush_l2() override {}
  double measure_copy_bytes_per_s() override { return 1e9; }
  int64_t free_memory_bytes() const override { return cpu_->free_memory_bytes(); }
  void start_timer() override {}
  double stop_timer_ms() override { return 1.0; }
  bool device_lost() const override { return lost_; }
  int64_t live_bytes() const override { return cpu_->live_bytes(); }

 private:
  std::unique_ptr<DeviceBackend> cpu_ = backends::make_device_backend("cpu", 0);
  int failing_sync_;
  int syncs_ = 0;
  bool lost_ = false;
};

TEST(ServerDeviceLoss, StickyErrorAfterTheCandidateIsARuntimeErrorThenExit) {
  // Syncs of one run: after the uploads (1), after poisoning (2), after the call (3).
  auto backend = std::make_unique<StickyFailureBackend>(3);
  DeviceBackend* device = backend.get();
  Server server(std::move(backend));
  const std::string path = build_cpu_kernel("server_good", cpu_unary_kernel(""));
  const json loaded =
      json::parse(server.handle_line(json{{"cmd", "load"}, {"id", 1}, {"path", path}}.dump()));
  RunRequest request;
  request.handle = loaded.at("handle").get<int>();
  request.signature = testing::unary_signature();
  request.workload = testing::workload_n("small", 8);
  request.seed = 1;
  request.output_path = testing::scratch_dir() + "/sticky.bin";
  std::ofstream(request.output_path).flush();
  json body = request;
  body["cmd"] = "run";
  body["id"] = 2;
  const json reply = json::parse(server.handle_line(body.dump()));
  EXPECT_EQ(reply.at("ok"), true);
  EXPECT_EQ(reply.at("verdict"), "runtime_error");
  EXPECT_NE(reply.at("message").get<std::string>().find("cudaErrorIllegalAddress"),
            std::string::npos);
  EXPECT_EQ(reply.at("exiting"), true);
  EXPECT_TRUE(server.should_exit());
  EXPECT_EQ(server.exit_code(), kWorkerExitDeviceLost);
  EXPECT_EQ(device->live_bytes(), 0);
}

}  // namespace
}  // namespace kforge::worker
