// The backend table: every backend of this build is complete, lookups fail with a clear message,
// and what once were name tests are capabilities.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "backends/backend.h"
#include "common/error.h"

namespace kforge::backends {
namespace {

std::string message_of(std::string_view name) {
  try {
    get_backend(name);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BackendRegistry, EveryBackendIsCompleteAndTheFallbackIsLast) {
  ASSERT_FALSE(all_backends().empty());
  for (const Backend* backend : all_backends()) {
    SCOPED_TRACE(backend->name);
    EXPECT_FALSE(backend->name.empty());
    EXPECT_FALSE(backend->language.empty());
    EXPECT_EQ(backend->source_extension.front(), '.');
    ASSERT_NE(backend->toolchain, nullptr);
    EXPECT_EQ(backend->toolchain->source_extension(), backend->source_extension);
    EXPECT_NE(backend->make_device, nullptr);
    EXPECT_FALSE(backend->prompt.fence.empty());
    // The prompt asks for a fence the parser then accepts, and an untagged fence is code too.
    const auto& tags = backend->fence_languages;
    EXPECT_NE(std::find(tags.begin(), tags.end(), backend->prompt.fence), tags.end());
    EXPECT_NE(std::find(tags.begin(), tags.end(), ""), tags.end());
    EXPECT_EQ(find_backend(backend->name), backend);
    EXPECT_EQ(&get_backend(backend->name), backend);
  }
  // `--backend auto` tries the probed backends and falls back to the last, which needs no probe.
  EXPECT_FALSE(all_backends().back()->can.probed_by_auto);
  EXPECT_EQ(all_backends().back()->name, "cpu");
}

TEST(BackendRegistry, AnUnknownNameListsTheBackendsOfThisBuild) {
  EXPECT_EQ(find_backend("tpu"), nullptr);
  EXPECT_EQ(message_of("tpu"), "unknown backend 'tpu' (expected " + backend_names() + ")");
  EXPECT_EQ(name_list({"cuda", "cpu", "torch"}), "cpu, cuda or torch");
  EXPECT_EQ(name_list({"cpu"}), "cpu");
  std::vector<std::string> known = known_backend_names();
  EXPECT_TRUE(std::is_sorted(known.begin(), known.end()));
  EXPECT_NE(std::find(known.begin(), known.end(), "cuda"), known.end());  // built or absent
}

TEST(BackendRegistry, AnAbsentBackendSaysWhyItIsNotInThisBuild) {
  if (absent_backends().empty()) GTEST_SKIP() << "every backend is in this build";
  for (const auto& [name, why] : absent_backends()) {
    EXPECT_EQ(find_backend(name), nullptr);
    EXPECT_EQ(message_of(name), "the " + name + " backend is not in this build: " + why);
    EXPECT_THROW(make_device_backend(name, 0), Error);
  }
}

TEST(BackendRegistry, CapabilitiesReplaceTheOldNameTests) {
  const Backend& cpu = get_backend("cpu");
  EXPECT_EQ(cpu.source_extension, ".cpp");
  EXPECT_FALSE(cpu.screens(PolicyCategory::default_stream_launch));  // no stream on the host
  EXPECT_TRUE(cpu.screens(PolicyCategory::library_compute));
  EXPECT_TRUE(cpu.can.several_workers);
  EXPECT_FALSE(cpu.can.several_devices || cpu.can.ncu_profiler || cpu.can.physical_floor ||
               cpu.can.builds_overlap_timing);
  EXPECT_EQ(backends_that(&Capabilities::several_workers), "cpu");
  const Backend* cuda = find_backend("cuda");
  if (cuda == nullptr) GTEST_SKIP() << "this build has no cuda backend";
  EXPECT_EQ(cuda->source_extension, ".cu");
  for (PolicyCategory category : switchable_policy_categories()) {
    EXPECT_TRUE(cuda->screens(category)) << to_string(category);
  }
  EXPECT_TRUE(cuda->can.probed_by_auto && cuda->can.several_devices && cuda->can.ncu_profiler &&
              cuda->can.physical_floor && cuda->can.builds_overlap_timing);
  EXPECT_EQ(backends_that(&Capabilities::several_devices), "cuda");
}

TEST(BackendRegistry, TheCpuDeviceIsMadeThroughTheTable) {
  std::unique_ptr<worker::DeviceBackend> device = make_device_backend("cpu", 0);
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->info().backend, "cpu");
}

}  // namespace
}  // namespace kforge::backends
