#include "cli/environment_source.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>

namespace kforge::cli {
namespace {

TEST(EnvironmentSource, NamesTheVariableOnlyWhenTheValueCameFromIt) {
  CLI::App app;
  CLI::App* sub = app.add_subcommand("optimize");
  int steps = 0;
  sub->add_option("--steps", steps)->envname("KFORGE_TEST_STEPS");
  const std::string message = "--steps: Value abc not in range 0 to 10";
  unsetenv("KFORGE_TEST_STEPS");
  EXPECT_EQ(name_environment_source(app, {"optimize"}, message), message);
  setenv("KFORGE_TEST_STEPS", "abc", 1);
  EXPECT_EQ(name_environment_source(app, {"optimize"}, message),
            "--steps (from KFORGE_TEST_STEPS): Value abc not in range 0 to 10");
  EXPECT_EQ(name_environment_source(app, {"optimize", "--steps", "abc"}, message), message);
  EXPECT_EQ(name_environment_source(app, {"optimize", "--steps=abc"}, message), message);
  EXPECT_EQ(name_environment_source(app, {"optimize"}, "--steps-x: bad"), "--steps-x: bad");
  unsetenv("KFORGE_TEST_STEPS");
}

}  // namespace
}  // namespace kforge::cli
