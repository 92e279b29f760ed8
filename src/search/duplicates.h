// Identical candidates, found before they are evaluated (issue 21): a model often answers the
// same kernel again, and templates can reach one parameter point by two paths. A candidate whose
// normalized source, defines and backend equal an earlier candidate's is recorded as "same as
// #N" with that candidate's result and spends no device time (Optimizer::attempt).
//
// Why not the artifact key: the compile cache already dedupes builds by content (source bytes,
// defines, flags, toolchain), but two sources that differ only in a comment or in indentation
// build to different keys and would be gated and timed twice. Normalizing comments and
// whitespace catches those; it is conservative on purpose: string literals, the lines that
// matter (C++ preprocessor directives, Python's statements) and Python's indentation are kept,
// so two sources with one key are the same program.
#pragma once

#include <string>
#include <string_view>

#include "compile/compiler.h"

namespace kforge::search {

/// How a source is tokenized for normalization.
enum class SourceLanguage {
  cpp,     // C, C++, CUDA C++: // and /* */ comments; "..." '...' and R"d(...)d" literals
  python,  // a Python ModelNew candidate (*.py): # comments; '...' "..." '''...''' """...""" literals
};

/// The language of a source named `source_name` (e.g. "warp_per_row.cu", "model_new.py"):
/// python for a name ending in ".py", else cpp.
SourceLanguage language_of(std::string_view source_name);

/// `source` with its comments removed and its whitespace normalized, string literals verbatim:
///   - a comment becomes one space (C++ `a/**/b` stays two tokens);
///   - C++: every run of whitespace, line breaks included, becomes one space, except that a
///     preprocessor directive stands on a line of its own (it ends at a line break not escaped
///     by a backslash, which is kept);
///   - Python: lines stay lines (they end statements); within one, every run of spaces and tabs
///     becomes one space, except the leading indentation, kept as written;
///   - spaces at the ends of lines and lines left empty are dropped; each line ends in "\n".
/// Never throws; an unterminated comment or literal runs to the end of the source.
std::string normalized_source(std::string_view source, SourceLanguage language);

/// The duplicate key of a candidate's build: SHA-256 (hex) over its backend, its language, its
/// normalized source and its defines (the template parameters, NAME=VALUE in name order). Equal
/// keys: the same program built the same way, so the same verdict and timings up to noise.
std::string duplicate_key(const compile::CompileJob& job);

}  // namespace kforge::search
