#include "cli/validators.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

namespace kforge::cli {

CLI::Validator positive_number(const std::string& hint) {
  return CLI::Validator(
      [hint](std::string& value) -> std::string {
        double number = 0.0;
        try {
          std::size_t used = 0;
          number = std::stod(value, &used);
          if (used != value.size()) throw std::invalid_argument(value);
        } catch (const std::exception&) {
          return "expected a positive number, got '" + value + "'";
        }
        if (!(number > 0.0)) {
          return "must be a positive number (got " + value + ")" + (hint.empty() ? "" : "; " + hint);
        }
        return "";
      },
      "POSITIVE");
}

namespace {

// `text` as a whole number when all of it is one that fits 64 bits, signed or not.
std::optional<std::int64_t> parse_signed(const std::string& text) {
  std::int64_t number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return number;
}

std::optional<std::uint64_t> parse_unsigned(const std::string& text) {
  std::uint64_t number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return number;
}

}  // namespace

CLI::Validator whole_number(std::int64_t min, std::uint64_t max, const std::string& hint) {
  return CLI::Validator(
      [min, max, hint](std::string& value) -> std::string {
        bool fits = false;
        if (!value.empty() && value.front() == '-') {
          const std::optional<std::int64_t> number = parse_signed(value);
          fits = number && *number >= min;  // a negative number is below any unsigned max
        } else {
          const std::optional<std::uint64_t> number = parse_unsigned(value);
          fits = number && *number <= max && (min <= 0 || *number >= std::uint64_t(min));
        }
        if (fits) return "";
        return fmt::format("expected a whole number from {} to {}, got '{}'{}", min, max, value,
                           hint.empty() ? "" : "; " + hint);
      },
      fmt::format("INT in [{} - {}]", min, max));
}

CLI::Validator number_in_range(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& value) -> std::string {
        try {
          std::size_t used = 0;
          const double number = std::stod(value, &used);
          if (used == value.size() && number >= min && number <= max) return "";
        } catch (const std::exception&) {
        }
        return fmt::format("expected a number from {:g} to {:g}, got '{}'", min, max, value);
      },
      fmt::format("FLOAT in [{:g} - {:g}]", min, max));
}

}  // namespace kforge::cli
