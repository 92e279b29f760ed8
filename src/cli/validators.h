// Command-line value checks shared by the subcommands, with messages that say what is expected
// in the user's terms (CLI11's own PositiveNumber prints the range as 0 to 1.8e308 in full).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace kforge::cli {

/// A number > 0: otherwise "must be a positive number (got VALUE)", followed by "; HINT" when
/// `hint` is not empty, or "expected a positive number, got 'VALUE'" when it is no number.
/// CLI11 prefixes the option's name. The validator's description (shown in --help) is POSITIVE.
CLI::Validator positive_number(const std::string& hint = "");

/// A whole number in [min, max]: otherwise "expected a whole number from MIN to MAX, got
/// 'VALUE'" (text, a fraction, a negative seed that would wrap round, a value past max alike),
/// followed by "; HINT" when `hint` is not empty. Its description in --help is "INT in [MIN -
/// MAX]". CLI11's Range said "Value 1.5 not in range 0 to 100000" for a fraction, and an unsigned
/// option took -1 as 18446744073709551615.
CLI::Validator whole_number(std::int64_t min, std::uint64_t max, const std::string& hint = "");

/// A number in [min, max]: otherwise "expected a number from MIN to MAX, got 'VALUE'", the
/// bounds written shortest (0 to 1, not 0.000000 to 1.000000). Description "FLOAT in [MIN - MAX]".
CLI::Validator number_in_range(double min, double max);

}  // namespace kforge::cli
