// Deterministic parsing and repair of a reply that should hold a KernelBench-format `ModelNew`
// module (--language cuda|triton; reply_parser.h does the same for native kernels).
//
// Extraction: reasoning in <think>...</think> is dropped; of the fenced blocks labelled python
// (python, py, python3) or unlabelled, the last one that defines `class ModelNew` at the top
// level wins (models restate and refine; the final version comes last); else the largest such
// block (it is then a candidate without ModelNew, which the evaluation's static check turns into
// a wrong_signature verdict whose message goes back to the model). Blocks of other languages
// (a ```cuda block restating the inline source, bash, json) are ignored. A reply without fences
// that defines `class ModelNew` is taken from its first import line.
//
// Repair (each fix is listed, for the run log), only where the intent is unambiguous:
//   - missing imports for names the module uses: `torch`, `torch.nn as nn`,
//     `torch.nn.functional as F`, `load_inline` (torch.utils.cpp_extension), `triton`,
//     `triton.language as tl`;
//   - a top-level `if __name__ == "__main__":` block is removed (a test harness that builds Model
//     would be refused by the screen as a call of the reference, and never runs under kforge).
#pragma once

#include <optional>
#include <string>

#include "llm/reply_parser.h"

namespace kforge::llm {

/// The ModelNew module in `reply`, or nullopt when the reply holds no Python code at all.
/// `blocks_found` counts the Python blocks; `truncated` says the chosen one was cut off.
std::optional<ExtractedCode> extract_model_new(const std::string& reply);

/// True when `source` defines `class ModelNew` at the top level.
bool defines_model_new(const std::string& source);

/// Applies the repairs above to `source`. Never fails: what cannot be repaired is left to the
/// static check and the candidate worker, whose verdicts go back to the model.
RepairResult repair_model_new(const std::string& source);

}  // namespace kforge::llm
