// Tests of one backend's behaviour skip in a build without that backend (a machine without the
// CUDA toolkit builds cpu only: CMakeLists.txt, KFORGE_CUDA), saying why.
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "backends/backend.h"

namespace kforge::testing {

/// Whether this build has the backend `name` (backends/backend.h).
inline bool has_backend(std::string_view name) {
  return backends::find_backend(name) != nullptr;
}

}  // namespace kforge::testing

/// Skips the current test (from its body) when this build lacks the backend `name`.
#define KFORGE_REQUIRE_BACKEND(name)                                  \
  if (!::kforge::testing::has_backend(name))                          \
  GTEST_SKIP() << "this build has no " << (name) << " backend ("      \
               << ::kforge::backends::absent_backends().front().second << ")"
