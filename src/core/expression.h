// Arithmetic over workload dimensions, for formulas such as a task's `flops = "2*rows*cols"`.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace kforge {

/// Evaluates `text` (numbers, dimension symbols, + - * /, parentheses) with symbols bound by
/// `dims`. Throws Error naming the formula and the position of a syntax error or unbound symbol.
double evaluate_expression(const std::string& text, const std::map<std::string, int64_t>& dims);

}  // namespace kforge
