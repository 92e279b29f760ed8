#include "core/baseline.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace kforge {
namespace {

// The strings are the command line's and result.json's: spelled out, not derived.
TEST(BaselineTest, KindsAndCacheModesKeepTheirNames) {
  for (const auto& [kind, name] : {std::pair{BaselineKind::eager, "eager"},
                                   std::pair{BaselineKind::compile, "compile"}}) {
    EXPECT_EQ(to_string(kind), name);
    EXPECT_EQ(parse_baseline_kind(name), kind);
  }
  for (const auto& [mode, name] : {std::pair{BaselineCacheMode::use, "use"},
                                   std::pair{BaselineCacheMode::refresh, "refresh"},
                                   std::pair{BaselineCacheMode::off, "off"}}) {
    EXPECT_EQ(to_string(mode), name);
    EXPECT_EQ(parse_baseline_cache_mode(name), mode);
  }
}

TEST(BaselineTest, UnknownNamesListTheKnownOnes) {
  try {
    parse_baseline_kind("inductor");
    FAIL() << "parsed an unknown baseline";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown baseline 'inductor' (expected one of eager, compile)");
  }
  EXPECT_THROW(parse_baseline_cache_mode("always"), Error);
}

}  // namespace
}  // namespace kforge
