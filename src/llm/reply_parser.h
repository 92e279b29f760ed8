// Deterministic parsing and repair of a model's reply, before anything is compiled
// (KernelBrain's parser/repair step): no second call to the model for faults a rule can fix.
//
// Extraction: reasoning in <think>...</think> is dropped; fenced blocks (``` or ~~~, with an
// optional language) are collected, a fence left open at the end of the reply counts as a
// (truncated) block; blocks of another language (python, bash, json, diff, ...) are ignored.
// Among the rest, the last block that defines the entry point kforge_run wins (models restate
// and refine; the final version comes last); else the largest block with a function taking a
// `kforge_args*` (a misnamed entry point the repair can rename); else the largest block. A reply
// without any fence that reads like a C++ source (an #include and a function) is taken whole
// from its first #include; a reply whose fences are all of another language has no code.
//
// Repair (each fix is listed in RepairResult::fixes, for the run log):
//   - a stray `main` function is removed;
//   - an entry point under another name is renamed kforge_run when exactly one function takes
//     a `kforge_args*` and none is called kforge_run (unambiguous intent);
//   - `kforge_args*` without const becomes `const kforge_args*` in the entry point;
//   - an entry point without C linkage gets KFORGE_API (extern "C", default visibility), and
//     loses `static`;
//   - missing includes are added: <kforge/kernel.h>, and standard headers for what the code
//     uses (<cmath>, <algorithm>, <cstdint>, <cstring>, <vector>, <limits>, <immintrin.h>, ...).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kforge::llm {

/// One fenced block of a reply.
struct FencedBlock {
  std::string language;  // the fence's info string, lowercased ("python", "" when unlabelled)
  std::string body;
  bool closed = false;   // false: the reply ended inside it
};

/// The fenced blocks (``` or ~~~) of `reply` in order, <think>...</think> spans dropped.
std::vector<FencedBlock> fenced_code_blocks(const std::string& reply);

struct ExtractedCode {
  std::string source;
  std::string language;    // the fence's info string ("cpp", "cuda", "" when unlabelled)
  int blocks_found = 0;    // fenced blocks of a usable language
  bool truncated = false;  // the chosen block's closing fence is missing
  bool from_fence = true;  // false: taken from unfenced text
};

/// The kernel in `reply` for `backend` ("cpu" | "cuda"), or nullopt when the reply holds no
/// code in a usable language.
std::optional<ExtractedCode> extract_kernel(const std::string& reply, const std::string& backend);

struct RepairResult {
  std::string source;
  std::vector<std::string> fixes;  // one short sentence per fix applied; empty if none
};

/// Applies the repairs above to `source` for `backend`. Never fails: what cannot be repaired
/// is left to the compiler (whose errors go back to the model).
RepairResult repair_kernel(const std::string& source, const std::string& backend);

}  // namespace kforge::llm
