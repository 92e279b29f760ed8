// Harness errors: exceptions that carry the failing call and the context added at each layer.
//
// Expected outcomes of a candidate (compile error, wrong answer, crash, timeout) are values
// (see core/verdict.h), never exceptions. An Error means kforge itself, its input or its
// environment is wrong; it is caught once per job and once in main, which prints
// "kforge: error: <message>" and exits non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace kforge {

/// A harness error with a human-readable message naming the thing and what was expected.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// Runs `body`; if it throws, rethrows an Error whose message is "<context>: <original>".
/// Used to add "while loading task X" style context at each layer.
template <typename Body>
auto with_context(const std::string& context, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::exception& e) {
    throw Error(context + ": " + e.what());
  }
}

}  // namespace kforge
