// A static look at a Python candidate's shape before it is built (issue 19): does it define
// `class ModelNew`, and does ModelNew.__init__ take Model.__init__'s parameters? A load_inline
// or Triton candidate's import compiles its kernels (tens of seconds to minutes); a candidate
// whose constructor cannot work is told so at once, with verdict wrong_signature, and the LLM
// generator's repair turn carries the message back to the model.
//
// A line-based reading of top-level `class` statements and the `def __init__` of their body
// (parameters may span lines; annotations and defaults are dropped). It decides only what it can
// read: a ModelNew bound by assignment, one whose __init__ is inherited from another base than
// nn.Module, or a Model without its own __init__ are left to the Python candidate worker, which
// compares the same names at load (python/kforge_torch/candidate.py, model_new_class).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kforge::evaluation {

/// A top-level class of a Python source, as far as a line-based reading tells.
struct PythonClassShape {
  bool found = false;              // a `class NAME` statement at column 0
  bool bound_otherwise = false;    // NAME assigned or imported at column 0 instead
  std::string bases;               // the text between the parentheses ("nn.Module"), trimmed
  bool has_init = false;           // its body defines __init__
  std::vector<std::string> init_parameters;  // after self, stars and annotations stripped
  std::string init_text;           // "(self, in_features, out_features=8)" as written, one line
};

/// The shape of the top-level class `name` in `source`.
PythonClassShape python_class_shape(std::string_view source, std::string_view name);

/// "" when `candidate` defines ModelNew whose __init__ parameters are Model.__init__'s in
/// `problem` (same names, same order), or when that cannot be read statically; else why not, in
/// a sentence a model can act on: no ModelNew at all, or the two constructors side by side.
std::string check_model_new_signature(std::string_view candidate, std::string_view problem);

}  // namespace kforge::evaluation
