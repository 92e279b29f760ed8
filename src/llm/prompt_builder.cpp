#include "llm/prompt_builder.h"

#include "backends/backend.h"
#include "llm/model_new_prompt.h"
#include "llm/torch_prompt.h"

#include <fmt/format.h>

#include <cmath>
#include <sstream>

namespace kforge::llm {
namespace {

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

std::string describe_stats(const memory::Stats& stats) {
  if (stats.attempts == 0) return "not tried yet";
  std::string text =
      fmt::format("{} attempts, {} faster than their parent", stats.attempts, stats.successes);
  if (stats.ok_attempts > 0) {
    text += fmt::format(", mean gain {:+.1f}% over {} correct ones",
                        100.0 * (std::exp(stats.mean_log_gain) - 1.0), stats.ok_attempts);
  }
  int64_t failed = stats.attempts - stats.ok_attempts;
  if (failed > 0) text += fmt::format(", {} failed (wrong, not compiling or crashing)", failed);
  return text;
}

// Strips directories from paths in compiler output ("/tmp/x/y/cand.cpp:3:1" -> "cand.cpp:3:1").
std::string short_paths(const std::string& line) {
  std::string out;
  size_t at = 0;
  while (at < line.size()) {
    bool token_start =
        at == 0 || line[at - 1] == ' ' || line[at - 1] == '\'' || line[at - 1] == '"';
    if (line[at] != '/' || !token_start) {
      out += line[at++];
      continue;
    }
    size_t end = line.find_first_of(" :'\"", at);
    end = end == std::string::npos ? line.size() : end;
    std::string path = line.substr(at, end - at);
    out += path.substr(path.rfind('/') + 1);
    at = end;
  }
  return out;
}

}  // namespace

std::string summarize_compile_errors(const std::string& log, int max_errors) {
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::vector<std::string> out;
  int errors = 0, total = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("error") == std::string::npos) continue;
    ++total;
    if (errors >= max_errors) continue;
    ++errors;
    for (size_t k = i; k < std::min(lines.size(), i + 3); ++k) out.push_back(short_paths(lines[k]));
  }
  if (total == 0) {
    size_t from = lines.size() > 15 ? lines.size() - 15 : 0;
    for (size_t i = from; i < lines.size(); ++i) out.push_back(short_paths(lines[i]));
  } else if (total > errors) {
    out.push_back(fmt::format("... and {} more error lines", total - errors));
  }
  return join(out, "\n");
}

std::string describe_feedback(const FeedbackContext& f) {
  std::string text = fmt::format("Candidate `{}`: {}.", f.candidate_id, to_string(f.verdict));
  switch (f.verdict) {
    case Verdict::ok:
      if (f.median_ms && f.reference_ms > 0) {
        text += fmt::format(" Median {:.4f} ms, {:.2f}x the reference ({:.4f} ms).", *f.median_ms,
                            f.reference_ms / *f.median_ms, f.reference_ms);
      }
      break;
    case Verdict::compile_error: {
      // A native build's errors are its build log; a Python candidate's build is its import in
      // the candidate worker (load_inline, Triton), whose verdict message holds the errors.
      const bool load_failure = !f.message.empty() && f.message != "compile error";
      text += " Compiler errors:\n\n```\n" +
              summarize_compile_errors(load_failure ? f.message : f.build_log) + "\n```";
      break;
    }
    default:
      if (!f.message.empty()) text += " Details: " + f.message.substr(0, 2000);
      break;
  }
  return text;
}

std::string describe_numbers(const KernelState& k) {
  if (!k.median_ms) return "Not timed yet.";
  std::string text = fmt::format("Median {:.4f} ms on the timed workload", *k.median_ms);
  if (k.reference_ms > 0) {
    text += fmt::format(", {:.2f}x the reference ({:.4f} ms)", k.reference_ms / *k.median_ms,
                        k.reference_ms);
  }
  if (k.bytes_moved > 0) {
    text += fmt::format(", {:.1f} GB/s of the minimum traffic ({} bytes per call)",
                        static_cast<double>(k.bytes_moved) / (*k.median_ms * 1e-3) * 1e-9,
                        k.bytes_moved);
  }
  return text + ".";
}

std::string diagnose(const KernelState& k) {
  if (!k.median_ms || k.bytes_moved <= 0) return "";
  double seconds = *k.median_ms * 1e-3;
  std::string text = fmt::format("Achieved {:.1f} GB/s of compulsory memory traffic",
                                 static_cast<double>(k.bytes_moved) / seconds * 1e-9);
  if (k.flops) {
    double intensity = *k.flops / static_cast<double>(k.bytes_moved);
    text += fmt::format(
        " and {:.2f} GFLOP/s; arithmetic intensity {:.2f} FLOP/byte, so the "
        "kernel should be {}",
        *k.flops / seconds * 1e-9, intensity,
        intensity < 4.0 ? "memory-bound: reduce passes over memory, vectorize "
                          "loads and stores, use every core"
                        : "compute-bound: vectorize the arithmetic, keep data "
                          "in registers and cache, use every core");
  }
  return text + ". (From timings only; no profiler counters on this path.)";
}

std::string describe_signature(const Task& task) {
  std::vector<std::string> lines;
  for (const TensorSpec& t : task.signature.tensors) {
    lines.push_back(fmt::format("- {} `{}`: {} [{}]{}",
                                t.role == TensorRole::input ? "input" : "output", t.name,
                                to_string(t.dtype), join(t.shape, ", "),
                                t.strided ? " (may be strided: honour DLTensor strides)" : ""));
  }
  for (const ScalarSpec& s : task.signature.scalars) {
    lines.push_back(fmt::format("- scalar `{}`: {} = {} (passed as double)", s.name,
                                to_string(s.dtype), s.value));
  }
  return join(lines, "\n");
}

std::string describe_workloads(const Task& task) {
  std::vector<std::string> lines;
  for (const Workload& w : task.workloads) {
    std::vector<std::string> dims;
    for (const auto& [name, value] : w.dims) dims.push_back(name + "=" + std::to_string(value));
    lines.push_back(
        fmt::format("- {}: {}{}", w.name, join(dims, ", "),
                    w.timed ? " (timed: this is the speed that counts)" : " (correctness)"));
  }
  return join(lines, "\n");
}

std::string describe_tolerance(const Task& task) {
  std::string text = fmt::format("|out - ref| <= {} + {} * |ref| per element", task.tolerance.atol,
                                 task.tolerance.rtol);
  for (const auto& [workload, atol] : task.tolerance.workload_atol) {
    text += fmt::format(" (atol {} on workload {})", atol, workload);
  }
  if (task.tolerance.normalized) {
    text += fmt::format(", and ||out - ref||_2 <= {} * ||ref||_2", *task.tolerance.normalized);
  }
  return text + ". NaN and Inf must appear exactly where the reference has them.";
}

std::string describe_direction(const StrategyContext& c) {
  const memory::Direction& d = c.direction;
  std::vector<std::string> lines = {"- Goal: " + d.goal};
  if (!d.triggers.empty()) lines.push_back("- When it applies: " + join(d.triggers, "; "));
  if (!d.risks.empty()) lines.push_back("- Risks: " + join(d.risks, "; "));
  lines.push_back("- Evidence so far: " + describe_stats(d.stats));
  lines.push_back(
      "- Directions chosen before (oldest first): " +
      (c.prefix.empty() ? std::string("none, this is the first step") : join(c.prefix, " -> ")));
  if (c.edge) {
    std::string edge = "- Moving here from " + c.edge->from_direction + ": ";
    edge += c.edge->rationale.empty() ? "no recorded rationale" : c.edge->rationale;
    if (!c.edge->risks.empty()) edge += "; risks: " + c.edge->risks;
    edge += "; evidence (right after it): " + describe_stats(c.edge->by_lag[0]);
    lines.push_back(edge);
  }
  return join(lines, "\n");
}

std::string describe_strategy(const memory::Strategy& s) {
  std::vector<std::string> lines = {"- Edit pattern: " + s.edit_pattern};
  if (!s.triggers.empty()) lines.push_back("- When it applies: " + join(s.triggers, "; "));
  if (!s.validation.empty()) lines.push_back("- Check after the edit: " + join(s.validation, "; "));
  lines.push_back("- Evidence so far: " + describe_stats(s.stats));
  return join(lines, "\n");
}

PromptBuilder::PromptBuilder(const PromptLibrary& library, const Task& task, std::string backend,
                             std::string abi_header, std::string reference_source,
                             KernelLanguage language)
    : library_(library),
      task_(task),
      backend_(std::move(backend)),
      abi_header_(std::move(abi_header)),
      reference_source_(std::move(reference_source)),
      language_(language) {}

PromptValues PromptBuilder::common() const {
  if (model_new()) {
    // A ModelNew is a Python module whatever its kernels are written in: every reply is a
    // ```python block, and the repair and generate templates say so through {{fence}}.
    PromptValues values = model_new_values(task_, language_, backend_, reference_source_);
    values.insert({{"backend", backend_},
                   {"language", "Python (ModelNew with " + values["kernel_kind"] + ")"},
                   {"fence", "python"},
                   {"backend_rules", ""},
                   {"task_name", task_.name},
                   {"task_description", task_.description},
                   {"tolerance", describe_tolerance(task_)},
                   {"reference_source", reference_source_}});
    return values;
  }
  const backends::PromptFragment& prompt = backends::get_backend(backend_).prompt;
  return {{"backend", backend_},
          {"language", prompt.language},
          {"fence", prompt.fence},
          {"backend_rules", prompt.rules},
          {"task_name", task_.name},
          {"task_description", task_.description},
          {"signature", describe_signature(task_)},
          {"workloads", describe_workloads(task_)},
          {"tolerance", describe_tolerance(task_)},
          {"reference_source", reference_source_},
          {"reference_fence", task_.has_torch_reference() ? "python" : prompt.fence},
          {"torch_mapping", describe_torch_mapping(task_)},
          {"abi_header", abi_header_}};
}

bool PromptBuilder::model_new() const {
  return is_model_new(language_) && task_.has_torch_reference();
}

PromptValues PromptBuilder::with_task_sections() const {
  PromptValues values = common();
  values["task_sections"] = library_.render(model_new() ? "model_new_task" : "task", values);
  return values;
}

std::string PromptBuilder::system_template() const {
  return model_new() ? "model_new_system" : "system";
}

std::vector<ChatMessage> PromptBuilder::first() const {
  PromptValues values = with_task_sections();
  return {{"system", library_.render(system_template(), values)},
          {"user", library_.render(model_new() ? "model_new_first" : "first", values)}};
}

std::vector<ChatMessage> PromptBuilder::generate(const KernelState& parent,
                                                 const StrategyContext& context,
                                                 const std::optional<FeedbackContext>& last,
                                                 const std::string& diagnosis) const {
  PromptValues values = with_task_sections();
  values["parent_id"] = parent.id;
  values["parent_numbers"] = describe_numbers(parent);
  values["parent_source"] = parent.source;
  values["last_feedback"] = last ? describe_feedback(*last) : "";
  values["direction_title"] = context.direction.title;
  values["direction_memory"] = describe_direction(context);
  values["strategy_title"] = context.strategy.title;
  values["strategy_memory"] = describe_strategy(context.strategy);
  values["diagnosis"] = diagnosis;
  return {{"system", library_.render(system_template(), values)},
          {"user", library_.render("generate", values)}};
}

ChatMessage PromptBuilder::repair(const FeedbackContext& failure) const {
  PromptValues values = common();
  values["candidate_id"] = failure.candidate_id;
  values["verdict"] = to_string(failure.verdict);
  std::string details = describe_feedback(failure);
  values["failure_details"] =
      details.substr(details.find(". ") == std::string::npos ? 0 : details.find(". ") + 2);
  return {"user", library_.render("repair", values)};
}

std::vector<ChatMessage> PromptBuilder::select(const std::string& state,
                                               const StrategyContext& context,
                                               std::span<const memory::Strategy> candidates) const {
  PromptValues values = common();
  values["state"] = state;
  values["direction_title"] = context.direction.title;
  values["direction_memory"] = describe_direction(context);
  std::vector<std::string> blocks, ids;
  for (const memory::Strategy& s : candidates) {
    blocks.push_back("### `" + s.id + "`: " + s.title + "\n" + describe_strategy(s));
    ids.push_back(s.id);
  }
  values["candidates"] = join(blocks, "\n\n");
  values["candidate_ids"] = join(ids, ", ");
  return {{"user", library_.render("select", values)}};
}

}  // namespace kforge::llm
