#include "cli/validators.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kforge::cli {
namespace {

// The message CLI11 gives for `--value TEXT` checked by positive_number(hint) ("" when accepted).
std::string parse_error(const std::string& text, const std::string& hint = "") {
  CLI::App app;
  double value = 1.0;
  app.add_option("--value", value)->check(positive_number(hint));
  std::vector<std::string> args = {text, "--value"};  // CLI11 parses a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(PositiveNumber, AcceptsPositiveNumbers) {
  EXPECT_EQ(parse_error("0.5"), "");
  EXPECT_EQ(parse_error("3"), "");
  EXPECT_EQ(parse_error("1e-3"), "");
}

TEST(PositiveNumber, RefusesZeroNegativeAndTextWithAShortMessage) {
  const std::string negative = parse_error("-1");
  EXPECT_NE(negative.find("--value"), std::string::npos) << negative;
  EXPECT_NE(negative.find("must be a positive number (got -1)"), std::string::npos) << negative;
  EXPECT_LT(negative.size(), 120u) << negative;  // no 300-digit range bound
  EXPECT_NE(parse_error("0").find("must be a positive number (got 0)"), std::string::npos);
  EXPECT_NE(parse_error("2x").find("expected a positive number, got '2x'"), std::string::npos);
  EXPECT_NE(parse_error("nan").find("must be a positive number"), std::string::npos);
}

TEST(PositiveNumber, AddsTheHint) {
  const std::string message = parse_error("-5", "leave it out for no limit");
  EXPECT_NE(message.find("(got -5); leave it out for no limit"), std::string::npos) << message;
}

}  // namespace
}  // namespace kforge::cli
