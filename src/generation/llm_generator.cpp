#include "generation/llm_generator.h"

#include <fmt/format.h>

#include <filesystem>
#include <future>
#include <sstream>

#include "backends/backend.h"
#include "common/files.h"
#include "common/hash.h"
#include "llm/model_new_reply.h"
#include "llm/reply_parser.h"

namespace kforge::generation {
namespace fs = std::filesystem;

namespace {

// The root of a repair chain: "llm-x-ab12cd-r2" -> "llm-x-ab12cd".
std::string root_id(const std::string& id) {
  size_t r = id.rfind("-r");
  if (r == std::string::npos || r + 2 >= id.size()) return id;
  for (size_t i = r + 2; i < id.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(id[i]))) return id;
  }
  return id.substr(0, r);
}

llm::FeedbackContext context_of(const std::string& id, const Feedback& f) {
  return {id, f.verdict, f.message, f.build_log, f.median_ms, f.reference_ms};
}

}  // namespace

LlmGenerator::LlmGenerator(llm::ChatClient& client, const llm::PromptBuilder& prompts,
                           memory::Store& store, const Task& task, LlmGeneratorOptions options,
                           std::function<std::string()> stop_reason, llm::LlmLogSink log)
    : client_(client),
      prompts_(prompts),
      store_(store),
      task_(task),
      options_(std::move(options)),
      stop_reason_(std::move(stop_reason)),
      log_(std::move(log)) {
  for (const Workload& w : task_.workloads) {
    if (w.timed) {
      bytes_moved_ = bytes_per_call(task_, w);
      flops_ = flops_per_call(task_, w);
      break;
    }
  }
}

std::vector<Proposal> LlmGenerator::initial_proposals() {
  Proposal seed;
  seed.job.backend = options_.backend;
  auto native = task_.reference_paths.find(options_.backend);
  if (native == task_.reference_paths.end() || model_new()) {
    // No native kernel to start from (a PyTorch problem): the model writes the first one from
    // the reference in write_sources(), and its failures are repaired like any other.
    seed.id = kFirstKernelId;
    seed.change = model_new() ? "the first ModelNew, written by the model from the module"
                              : "the first kernel, written by the model from the reference";
    seed.job.source_name = seed.id + source_extension();
    std::lock_guard lock(mutex_);
    first_ids_.insert(seed.id);
    return {seed};
  }
  // The reference is correct by definition: the first kernel the model improves.
  seed.id = "reference-seed";
  seed.change = "the task's reference, as the starting point for the model";
  seed.job.source = read_file(native->second);
  seed.job.source_name = fs::path(native->second).filename().string();
  return {seed};
}

std::optional<Proposal> LlmGenerator::apply(const Proposal& parent,
                                            const memory::Strategy& strategy) {
  Proposal proposal;
  proposal.id =
      "llm-" + strategy.id + "-" + sha256_hex(parent.id + "\n" + strategy.id).substr(0, 6);
  proposal.parent_id = parent.id;
  proposal.change = strategy.id + ": " + strategy.title + " (written by the model)";
  proposal.job.backend = options_.backend;
  proposal.job.source_name = proposal.id + source_extension();
  std::lock_guard lock(mutex_);
  planned_[proposal.id] = {strategy, parent};
  return proposal;
}

std::string LlmGenerator::source_extension() const {
  return model_new() ? ".py" : backends::get_backend(options_.backend).source_extension;
}

std::string LlmGenerator::standalone_source(const Proposal& proposal) const {
  if (model_new()) {
    // The module as it runs: a Python comment names where it came from.
    return "# kforge candidate " + proposal.id + " (generator llm, model " + options_.model +
           ", language " + to_string(options_.language) + ", backend " + options_.backend +
           ")\n" + proposal.job.source;
  }
  std::ostringstream text;
  text << "// kforge candidate " << proposal.id << " (generator llm, model " << options_.model
       << ", backend " << options_.backend << ")\n";
  for (const auto& [name, value] : proposal.job.defines)
    text << "#define " << name << " " << value << "\n";
  text << proposal.job.source;
  return text.str();
}

llm::KernelState LlmGenerator::kernel_state(const Proposal& proposal) const {
  llm::KernelState state;
  state.id = proposal.id;
  state.source = standalone_source(proposal);
  state.bytes_moved = bytes_moved_;
  state.flops = flops_;
  if (auto it = outcomes_.find(proposal.id); it != outcomes_.end()) {
    state.median_ms = it->second.median_ms;
    state.reference_ms = it->second.reference_ms;
  }
  return state;
}

llm::StrategyContext LlmGenerator::strategy_context(const memory::Strategy& strategy) const {
  llm::StrategyContext context;
  context.strategy = strategy;
  for (const memory::Direction& d : store_.directions(options_.backend)) {
    if (d.id == strategy.direction_id) context.direction = d;
  }
  context.prefix = prefix_;
  if (!prefix_.empty()) context.edge = store_.edge(prefix_.back(), strategy.direction_id);
  return context;
}

llm::ChatRequest LlmGenerator::request(std::vector<llm::ChatMessage> messages,
                                       const std::string& purpose, const std::string& label) const {
  llm::ChatRequest r;
  r.model = options_.model;
  r.messages = std::move(messages);
  r.temperature = options_.temperature;
  r.max_tokens = options_.max_tokens;
  r.purpose = purpose;
  r.label = label;
  return r;
}

std::optional<llm::RepairResult> LlmGenerator::extract_source(const std::string& content,
                                                              bool* truncated,
                                                              std::string* note) const {
  if (model_new()) {
    std::optional<llm::ExtractedCode> code = llm::extract_model_new(content);
    if (!code) {
      // Still a candidate: the static check's verdict (no ModelNew) goes back to the model.
      *note = "; the reply held no python block";
      return llm::RepairResult{"# the model's reply held no ```python block\n", {}};
    }
    *truncated = code->truncated;
    if (!llm::defines_model_new(code->source)) *note = "; the python block defines no ModelNew";
    return llm::repair_model_new(code->source);
  }
  std::optional<llm::ExtractedCode> code = llm::extract_kernel(content, options_.backend);
  if (!code) return std::nullopt;
  *truncated = code->truncated;
  return llm::repair_kernel(code->source, options_.backend);
}

bool LlmGenerator::take_kernel(Proposal& proposal, const llm::ChatResult& reply) {
  if (!reply.ok()) {
    proposal.failure = "LLM " + llm::to_string(reply.error.kind) + ": " + reply.error.message;
    return false;
  }
  const llm::ChatResponse& response = *reply.response;
  bool truncated = false;
  std::string notes;
  std::optional<llm::RepairResult> repaired = extract_source(response.content, &truncated, &notes);
  if (!repaired) {
    proposal.failure =
        fmt::format("the model's reply has no {} code block ({} characters{})",
                    backends::get_backend(options_.backend).language, response.content.size(),
                    response.finish_reason == "length" ? ", cut off at max_tokens" : "");
    return false;
  }
  proposal.job.source = repaired->source;
  if (truncated) notes += "; the code block was cut off";
  for (const std::string& fix : repaired->fixes) notes += "; " + fix;
  proposal.change += notes;
  log_(
      fmt::format("  [llm] {}: {}+{} tokens, ${:.4f}, {:.1f} s{}{}", proposal.id,
                  response.usage.prompt_tokens, response.usage.completion_tokens, response.cost_usd,
                  response.latency_s, response.from_cache ? " (replayed)" : "", notes),
      {{"event", "llm_generation"},
       {"id", proposal.id},
       {"prompt_tokens", response.usage.prompt_tokens},
       {"completion_tokens", response.usage.completion_tokens},
       {"cost_usd", response.cost_usd},
       {"latency_s", response.latency_s},
       {"from_cache", response.from_cache},
       {"truncated", truncated},
       {"fixes", repaired->fixes}});
  return true;
}

void LlmGenerator::write_sources(const std::vector<Proposal*>& proposals) {
  struct Job {
    Proposal* proposal;
    llm::ChatRequest request;
  };
  std::vector<Job> jobs;
  std::vector<std::string> directions;
  {
    std::lock_guard lock(mutex_);
    for (Proposal* p : proposals) {
      if (!p->job.source.empty()) continue;
      if (first_ids_.count(p->id)) {
        jobs.push_back({p, request(prompts_.first(), "first", p->id)});
        continue;
      }
      auto planned = planned_.find(p->id);
      if (planned == planned_.end()) continue;
      llm::StrategyContext context = strategy_context(planned->second.strategy);
      llm::KernelState parent = kernel_state(planned->second.parent);
      std::string diagnosis = llm::diagnose(parent);
      jobs.push_back({p, request(prompts_.generate(parent, context, last_feedback_, diagnosis),
                                 "generate", p->id)});
      directions.push_back(planned->second.strategy.direction_id);
    }
  }
  if (jobs.empty()) return;
  if (std::string why = stop_reason_(); !why.empty()) {
    for (Job& job : jobs) job.proposal->failure = why;
    return;
  }
  // Concurrent requests; the client's slots bound how many are in flight.
  std::vector<std::future<llm::ChatResult>> replies;
  for (Job& job : jobs) {
    replies.push_back(
        std::async(std::launch::async, [this, &job] { return client_.complete(job.request); }));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    llm::ChatResult reply = replies[i].get();
    Proposal& proposal = *jobs[i].proposal;
    if (take_kernel(proposal, reply)) {
      std::vector<llm::ChatMessage> conversation = jobs[i].request.messages;
      conversation.push_back({"assistant", reply.response->content});
      std::lock_guard lock(mutex_);
      conversations_[proposal.id] = std::move(conversation);
    }
  }
  std::lock_guard lock(mutex_);
  prefix_.insert(prefix_.end(), directions.begin(), directions.end());
}

void LlmGenerator::observe(const Proposal& proposal, const Feedback& feedback) {
  std::lock_guard lock(mutex_);
  outcomes_[proposal.id] = feedback;
  last_feedback_ = context_of(proposal.id, feedback);
  if (feedback.is_best) best_id_ = proposal.id;
}

std::optional<Proposal> LlmGenerator::repair(const Proposal& failed, const Feedback& feedback) {
  std::vector<llm::ChatMessage> messages;
  Proposal proposal;
  {
    std::lock_guard lock(mutex_);
    auto conversation = conversations_.find(failed.id);
    if (conversation == conversations_.end()) return std::nullopt;  // not written by the model
    messages = conversation->second;
    messages.push_back(prompts_.repair(context_of(failed.id, feedback)));
    int attempt = ++repairs_[root_id(failed.id)];
    proposal = failed;
    proposal.id = root_id(failed.id) + "-r" + std::to_string(attempt);
    proposal.job.source.clear();
    proposal.job.source_name = proposal.id + source_extension();
    proposal.change = "repair " + std::to_string(attempt) + " of " + failed.id + " after " +
                      to_string(feedback.verdict);
    proposal.failure.clear();
  }
  if (std::string why = stop_reason_(); !why.empty()) {
    proposal.failure = why;
    return proposal;
  }
  llm::ChatResult reply = client_.complete(request(messages, "repair", proposal.id));
  if (take_kernel(proposal, reply)) {
    messages.push_back({"assistant", reply.response->content});
    std::lock_guard lock(mutex_);
    conversations_[proposal.id] = std::move(messages);
  }
  return proposal;
}

llm::SearchState LlmGenerator::search_state() const {
  std::lock_guard lock(mutex_);
  llm::SearchState state;
  state.prefix = prefix_;
  std::vector<std::string> lines;
  if (!best_id_.empty()) {
    const Feedback& best = outcomes_.at(best_id_);
    llm::KernelState kernel;
    kernel.id = best_id_;
    kernel.median_ms = best.median_ms;
    kernel.reference_ms = best.reference_ms;
    kernel.bytes_moved = bytes_moved_;
    kernel.flops = flops_;
    lines.push_back("- Best kernel so far: `" + best_id_ + "`. " + llm::describe_numbers(kernel));
    if (std::string d = llm::diagnose(kernel); !d.empty()) lines.push_back("- Diagnosis: " + d);
  }
  int tried = static_cast<int>(outcomes_.size()), correct = 0;
  for (const auto& [id, f] : outcomes_) correct += f.verdict == Verdict::ok;
  lines.push_back(fmt::format("- Candidates evaluated: {}, correct: {}.", tried, correct));
  if (last_feedback_)
    lines.push_back("- Last feedback: " + llm::describe_feedback(*last_feedback_));
  std::string summary;
  for (const std::string& line : lines) summary += (summary.empty() ? "" : "\n") + line;
  state.summary = summary;
  return state;
}

}  // namespace kforge::generation
