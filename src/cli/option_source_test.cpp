#include "cli/option_source.h"

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

TEST(OptionSource, OnlyTheCommandLineCountsAsGiven) {
  CLI::App app;
  CLI::App* sub = app.add_subcommand("optimize");
  int seed = 0, steps = 0;
  bool json = false;
  std::string output;
  sub->add_option("--seed", seed)->envname("KFORGE_TEST_SEED");
  sub->add_option("--steps", steps);
  sub->add_flag("--json", json);
  sub->add_option("-o,--output", output);
  setenv("KFORGE_TEST_SEED", "7", 1);  // a value from the environment is not given
  EXPECT_EQ(options_on_command_line(*sub, {"optimize", "--steps=2", "--json", "-o", "x"}),
            (std::set<std::string>{"--steps", "--json", "--output"}));
  EXPECT_TRUE(options_on_command_line(*sub, {"optimize"}).empty());
  unsetenv("KFORGE_TEST_SEED");
}

}  // namespace
}  // namespace kforge::cli
