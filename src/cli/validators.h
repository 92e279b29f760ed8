// Command-line value checks shared by the subcommands, with messages that say what is expected
// in the user's terms (CLI11's own PositiveNumber prints the range as 0 to 1.8e308 in full).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace kforge::cli {

/// A number > 0: otherwise "must be a positive number (got VALUE)", followed by "; HINT" when
/// `hint` is not empty, or "expected a positive number, got 'VALUE'" when it is no number.
/// CLI11 prefixes the option's name. The validator's description (shown in --help) is POSITIVE.
CLI::Validator positive_number(const std::string& hint = "");

}  // namespace kforge::cli
