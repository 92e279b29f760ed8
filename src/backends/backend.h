// One backend = one folder under src/backends/ behind one table, registered once (after ggml's
// backend registry, ggml-backend-reg.cpp, which lists every backend the build has in one place).
//
// A Backend says everything the rest of kforge needs to know about a kind of candidate: its
// name (--backend, a task's [reference] keys, the memory's backend column), its source language
// for the LLM (prompt fragment, code-fence tags, headers the reply parser may add), the
// toolchain that builds it, which rules of the static source screen apply, the worker side that
// runs it (a DeviceBackend), how `--backend auto` chooses it, and what it can do (several
// devices, several workers on one device, a profiler, the physical timing floor). Code outside
// src/backends/<name>/ asks the table, never compares the name.
//
// Adding a backend (docs/architecture.md): a folder src/backends/<name>/ that defines a
// `const Backend& <name>_backend()`, and one line in registry.cpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compile/toolchain.h"
#include "compile/toolchain_compiler.h"
#include "core/policy_settings.h"
#include "worker/device_backend.h"

namespace kforge::backends {

/// A header the reply parser adds to an LLM's kernel that uses one of `uses` without including
/// it (llm/reply_parser.h). Backend-specific ones live in the table; the C++ ones every backend
/// shares live in the parser.
struct AutoInclude {
  std::string header;              // e.g. "cuda_fp16.h"
  std::vector<std::string> uses;   // whole words, or prefixes ending in '_' or "::"
};

/// What the LLM prompt says about the backend: the values of prompts/*.md placeholders.
struct PromptFragment {
  std::string language;  // {{language}}: "CUDA C++", "C++20 (g++ -O3 -march=native -fopenmp)"
  std::string fence;     // {{fence}}: the code-fence tag the reply must use ("cuda", "cpp")
  std::string rules;     // {{backend_rules}}: "- ..." lines of rules only this backend has, or ""
  /// For a ModelNew whose kernels load_inline builds (--language cuda, llm/model_new_prompt.h):
  /// what they are written in ("CUDA kernels") and "- ..." lines on building and launching them.
  std::string model_new_kind;
  std::string model_new_rules;
};

/// What a backend can do; each flag replaces what was once a test of the backend's name.
struct Capabilities {
  /// `--backend auto` asks a worker of this backend for its device (the orchestrator never
  /// touches a device itself) and takes the first in registry order whose worker answers; a
  /// backend without the flag is the fallback (cpu), always available.
  bool probed_by_auto = false;
  /// --devices 0,1: one candidate worker per listed device (cuda).
  bool several_devices = false;
  /// --workers N: N candidate workers sharing the one host device (cpu).
  bool several_workers = false;
  /// --profile: Nsight Compute profiles the best kernel (cuda).
  bool ncu_profiler = false;
  /// The gate rejects timings below the device's physical floor (bytes / measured bandwidth,
  /// FLOPs / measured rate) as implausible_timing; a shared CPU's measured rates are too noisy.
  bool physical_floor = false;
  /// With a worker pool, builds overlap the timings of other candidates (evaluate_batch): the
  /// device times while the host compiles. On cpu a compiler would share the cores it times on.
  bool builds_overlap_timing = false;
  /// DeviceInfo carries a compute capability worth printing ("sm 9.0").
  bool compute_capability = false;
  /// --language triton: a ModelNew's Triton kernels run on its devices (cuda).
  bool triton = false;
};

struct Backend {
  std::string name;              // "cpu", "cuda"
  std::string language;          // "C++", "CUDA": log lines ("the LLM wrote 2 CUDA kernels")
  std::string source_extension;  // ".cpp", ".cu": candidates, references, kernels/<name>/
  /// Code-fence tags whose block the reply parser takes as this backend's code ("" is an
  /// untagged fence).
  std::vector<std::string> fence_languages;
  PromptFragment prompt;
  std::vector<AutoInclude> auto_includes;
  /// Switchable source-screen categories that do not apply to this backend's sources (cpu:
  /// default_stream_launch, there being no stream).
  std::vector<PolicyCategory> unscreened;
  /// Builds its candidates and references; never null.
  const compile::Toolchain* toolchain = nullptr;
  /// The worker side: the device `device_index` of this backend, for kforge-worker's server.
  /// Throws Error (cuda: "no CUDA device: <reason>") when it cannot be had.
  std::unique_ptr<worker::DeviceBackend> (*make_device)(int device_index) = nullptr;
  Capabilities can;

  /// Whether the source screen checks `category` for this backend.
  bool screens(PolicyCategory category) const;
};

/// Every backend in this build, in `--backend auto` order (those probed first, the fallback
/// last).
const std::vector<const Backend*>& all_backends();

/// The backend named `name`, or nullptr when this build has none of that name.
const Backend* find_backend(std::string_view name);

/// The backend named `name`. Throws Error: "unknown backend 'x' (expected cpu or cuda)", or for
/// a backend kforge knows but this build lacks, why it is absent ("the cuda backend is not in
/// this build: kforge was built without the CUDA toolkit ...").
const Backend& get_backend(std::string_view name);

/// "a", "a or b", "a, b or c": `names` sorted, for messages ("cpu, cuda or torch").
std::string name_list(std::vector<std::string> names);

/// "cpu or cuda": the names of this build's backends, for messages.
std::string backend_names();

/// Every backend name kforge has, in this build or absent from it, sorted: what a memory or a
/// task may name, and what a command line may ask for (an absent one then gets absent's why).
std::vector<std::string> known_backend_names();

/// "cuda", "cpu or cuda": the names of this build's backends that have capability `flag`
/// (e.g. &Capabilities::several_devices), for messages; "" when none has it.
std::string backends_that(bool Capabilities::*flag);

/// Backends kforge has but this build lacks, with why: {"cuda", "kforge was built without the
/// CUDA toolkit (...)"}. Empty when every backend is in.
const std::vector<std::pair<std::string, std::string>>& absent_backends();

/// The toolchain lookup for compile::ToolchainCompiler: get_backend(name).toolchain.
const compile::Toolchain& toolchain_for(const std::string& backend);

/// A ToolchainCompiler over this build's backends.
std::unique_ptr<compile::ToolchainCompiler> make_compiler(compile::ToolchainOptions options);

/// The worker side of backend `name` for device `device_index` (kforge-worker's main). Throws
/// as get_backend and as the backend's make_device do.
std::unique_ptr<worker::DeviceBackend> make_device_backend(std::string_view name,
                                                           int device_index);

}  // namespace kforge::backends
