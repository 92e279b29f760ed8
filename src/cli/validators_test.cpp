#include "cli/validators.h"

#include <gtest/gtest.h>

#include <cstdint>
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

// The message CLI11 gives for `--value TEXT` of type T checked by `validator` ("" when accepted).
template <typename T>
std::string checked_error(const std::string& text, const CLI::Validator& validator) {
  CLI::App app;
  T value{};
  app.add_option("--value", value)->check(validator);
  std::vector<std::string> args = {text, "--value"};
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(WholeNumber, AcceptsWholeNumbersInRange) {
  EXPECT_EQ(checked_error<int>("0", whole_number(0, 10)), "");
  EXPECT_EQ(checked_error<int>("10", whole_number(0, 10)), "");
  EXPECT_EQ(checked_error<std::uint64_t>("18446744073709551615", whole_number(0, UINT64_MAX)), "");
}

// `--steps 1.5` said "Value 1.5 not in range 0 to 100000", `--max-candidates 1.5` "Could not
// convert", and `--seed -1` ran with seed 18446744073709551615.
TEST(WholeNumber, RefusesFractionsTextNegativesAndOverflowNamingTheRange) {
  const std::string expected = "--value: expected a whole number from 0 to 100000, got '";
  for (const std::string text : {"1.5", "abc", "-1", "100001", "99999999999999999999", ""}) {
    EXPECT_EQ(checked_error<int>(text, whole_number(0, 100000)), expected + text + "'") << text;
  }
  EXPECT_EQ(checked_error<std::uint64_t>("-1", whole_number(0, UINT64_MAX)),
            "--value: expected a whole number from 0 to 18446744073709551615, got '-1'");
  EXPECT_EQ(checked_error<int>("0", whole_number(1, 5, "leave it out for no limit")),
            "--value: expected a whole number from 1 to 5, got '0'; leave it out for no limit");
  EXPECT_EQ(checked_error<int>("-3", whole_number(-5, 5)), "");
}

TEST(NumberInRange, WritesTheBoundsShortest) {
  EXPECT_EQ(checked_error<double>("0.5", number_in_range(0.0, 1.0)), "");
  EXPECT_EQ(checked_error<double>("1.5", number_in_range(0.0, 1.0)),
            "--value: expected a number from 0 to 1, got '1.5'");
  EXPECT_EQ(checked_error<double>("x", number_in_range(0.0, 1.0)),
            "--value: expected a number from 0 to 1, got 'x'");
}

}  // namespace
}  // namespace kforge::cli
