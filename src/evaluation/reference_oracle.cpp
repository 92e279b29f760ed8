#include "evaluation/reference_oracle.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "common/cpus.h"
#include "common/error.h"
#include "evaluation/comparison.h"
#include "evaluation/tolerance.h"
#include "worker/host_data.h"
#include "worker/provided_inputs.h"

namespace kforge::evaluation {
namespace {

/// The compiler's log with the cached copy of the reference (CACHE_DIR/<key>.cpp or .cu, the
/// file the compiler saw) named as the task's reference file, whose lines it copies verbatim:
/// "reference.cpp:50:8: error: ..." points the user at the file to fix.
std::string with_reference_paths(std::string log, const std::string& key, const Task& task) {
  for (const auto& [backend, path] : task.reference_paths) {
    const backends::Backend* table = backends::find_backend(backend);
    if (table == nullptr) continue;  // "torch": a problem file, never compiled
    const std::string copy = key + table->source_extension;
    for (size_t at = log.find(copy); at != std::string::npos; at = log.find(copy, at)) {
      size_t start = at;
      while (start > 0 && log[start - 1] != ' ' && log[start - 1] != '\n' &&
             log[start - 1] != '\'' && log[start - 1] != '"') {
        --start;
      }
      log.replace(start, at + copy.size() - start, path);
      at = start + path.size();
    }
  }
  return log;
}

std::string cache_key(const GateCase& gate_case) {
  return gate_case.workload.name + "/" + std::to_string(gate_case.seed) + "/" +
         gate_case.distribution + (gate_case.padded ? "/padded" : "") +
         (gate_case.remap != "none" ? "/" + gate_case.remap : "");
}

/// Flat index of the first element whose bytes are all 0xFF (the poison pattern: no computation
/// produces it, while a computed NaN has another payload), or -1. Scans gigabytes: chunks run on
/// every hardware thread, each with a branch-free inner loop over whole words.
template <typename Word>
int64_t first_poisoned_words(const std::byte* data, int64_t elements) {
  constexpr int64_t kChunk = int64_t{1} << 20;
  const int64_t chunks = (elements + kChunk - 1) / kChunk;
  std::vector<int64_t> found(static_cast<size_t>(chunks), -1);
  std::atomic<int64_t> next{0};
  const auto scan = [&] {
    for (int64_t c = next++; c < chunks; c = next++) {
      const int64_t begin = c * kChunk, end = std::min(elements, begin + kChunk);
      bool any = false;
      for (int64_t e = begin; e < end; ++e) {
        Word word;
        std::memcpy(&word, data + e * sizeof(Word), sizeof(Word));
        any |= word == static_cast<Word>(~Word{0});
      }
      if (!any) continue;
      for (int64_t e = begin; e < end; ++e) {
        Word word;
        std::memcpy(&word, data + e * sizeof(Word), sizeof(Word));
        if (word == static_cast<Word>(~Word{0})) {
          found[static_cast<size_t>(c)] = e;
          break;
        }
      }
    }
  };
  const unsigned threads = elements < kChunk ? 1 : static_cast<unsigned>(usable_cpus());
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(scan);
  scan();
  for (std::thread& thread : pool) thread.join();
  for (int64_t index : found) {
    if (index >= 0) return index;
  }
  return -1;
}

int64_t first_poisoned(std::span<const std::byte> bytes, int element_bytes) {
  const auto elements = static_cast<int64_t>(bytes.size()) / element_bytes;
  switch (element_bytes) {
    case 1: return first_poisoned_words<uint8_t>(bytes.data(), elements);
    case 2: return first_poisoned_words<uint16_t>(bytes.data(), elements);
    case 4: return first_poisoned_words<uint32_t>(bytes.data(), elements);
    case 8: return first_poisoned_words<uint64_t>(bytes.data(), elements);
    default: throw Error("unsupported element size " + std::to_string(element_bytes));
  }
}

}  // namespace

std::string GateCase::label() const {
  return "workload '" + workload.name + "', seed " + std::to_string(seed) + " (" + distribution +
         (padded ? " inputs, non-contiguous" : " inputs") +
         (remap != "none" ? ", remapped " + remap + ")" : ")");
}

std::vector<OutputLayout> output_layout(const Signature& signature, const Workload& workload) {
  std::vector<OutputLayout> layout;
  int64_t offset = 0;
  for (size_t i = 0; i < signature.tensors.size(); ++i) {
    const TensorSpec& spec = signature.tensors[i];
    if (spec.role != TensorRole::output) continue;
    OutputLayout entry;
    entry.tensor = i;
    entry.shape = bind_shape(spec, workload);
    entry.offset = offset;
    entry.bytes = worker::element_count(entry.shape) * dtype_size(spec.dtype);
    offset += entry.bytes;
    layout.push_back(std::move(entry));
  }
  return layout;
}

ReferenceOracle::ReferenceOracle(worker::Worker& worker, const Task& task, ScratchDir& scratch,
                                 double timeout_s)
    : worker_(worker), task_(task), scratch_(scratch), timeout_s_(timeout_s) {}

void ReferenceOracle::load(const compile::Artifact& reference) {
  if (reference.verdict != Verdict::ok) {
    throw Error("the task's reference does not compile (" + task_.source_path + "):\n" +
                with_reference_paths(reference.log, reference.key, task_));
  }
  worker::LoadResult loaded = worker_.load({reference.path}, timeout_s_);
  if (loaded.verdict != Verdict::ok) {
    throw Error("the task's reference does not load: " + to_string(loaded.verdict) + ": " +
                loaded.message);
  }
  handle_ = loaded.handle;
}

std::pair<worker::RunResult, std::unique_ptr<ExpectedOutputs>> ReferenceOracle::run_case(
    int handle, const GateCase& gate_case, int calls, const std::string& file_tag) {
  worker::RunRequest request;
  request.handle = handle;
  request.signature = task_.signature;
  request.workload = gate_case.workload;
  request.seed = gate_case.seed;
  request.distribution = gate_case.distribution;
  request.calls = calls;
  request.padded = gate_case.padded;
  request.late_write_wait_ms = 0.0;
  request.remap = gate_case.remap;
  request.provided_dir = provided_dir_;
  request.output_path = scratch_.next_file(file_tag);
  create_private_file(request.output_path);
  worker::RunResult run = worker_.run(request, timeout_s_);
  auto outputs = std::make_unique<ExpectedOutputs>(ExpectedOutputs{
      MappedFile(request.output_path, MappedFile::Mode::read), run.output_bytes,
      run.call_ms.empty() ? 0.0 : run.call_ms.front(), run.input_ms, run.output_ms});
  ::unlink(request.output_path.c_str());  // mapped: the pages live until the mapping goes
  return {std::move(run), std::move(outputs)};
}

void ReferenceOracle::load_fp32_model(const compile::Artifact& model) {
  if (model.verdict != Verdict::ok) {
    throw Error("the task's fp32 model (its reference built with [fp32_model] defines) does not "
                "compile (" + task_.source_path + "):\n" +
                with_reference_paths(model.log, model.key, task_));
  }
  worker::LoadResult loaded = worker_.load({model.path}, timeout_s_);
  if (loaded.verdict != Verdict::ok) {
    throw Error("the task's fp32 model does not load: " + to_string(loaded.verdict) + ": " +
                loaded.message);
  }
  model_handle_ = loaded.handle;
}

const ExpectedOutputs* ReferenceOracle::fp32_model(const GateCase& gate_case) {
  if (model_handle_ < 0) return nullptr;
  const std::string key = cache_key(gate_case);
  if (auto found = model_cache_.find(key); found != model_cache_.end()) return found->second.get();
  const std::string where = "the task's fp32 model (" + gate_case.label() + ")";
  auto [run, outputs] = run_case(model_handle_, gate_case, 1, "model");
  if (run.verdict != Verdict::ok) {
    throw Error(where + " failed: " + to_string(run.verdict) + ": " + run.message);
  }
  for (const OutputLayout& output : output_layout(task_.signature, gate_case.workload)) {
    const TensorSpec& spec = task_.signature.tensors[output.tensor];
    if (int64_t e = first_poisoned(outputs->file.bytes(output.offset, output.bytes),
                                   dtype_size(spec.dtype));
        e >= 0) {
      throw Error(where + " left output '" + spec.name + "' unwritten at " +
                  format_index(e, output.shape));
    }
  }
  return model_cache_.emplace(key, std::move(outputs)).first->second.get();
}

const ExpectedOutputs& ReferenceOracle::expected(const GateCase& gate_case) {
  const std::string key = cache_key(gate_case);
  if (auto found = cache_.find(key); found != cache_.end()) return *found->second;
  if (handle_ < 0) throw Error("reference oracle: no reference loaded");
  const std::string where = "the task's reference (" + gate_case.label() + ")";
  auto [run, outputs] = run_case(handle_, gate_case, gate_case.calls, "expected");
  if (run.verdict != Verdict::ok) {
    throw Error(where + " failed: " + to_string(run.verdict) + ": " + run.message);
  }
  if (!run.input_modified.empty()) {
    throw Error(where + " modified its input " + run.input_modified);
  }
  if (!run.guard_violation.empty()) {
    throw Error(where + " " + run.guard_violation + ": it must write only inside its outputs");
  }
  const std::vector<OutputLayout> layout = output_layout(task_.signature, gate_case.workload);
  for (const OutputLayout& output : layout) {
    const TensorSpec& spec = task_.signature.tensors[output.tensor];
    const auto first = outputs->file.bytes(output.offset, output.bytes);
    if (int64_t e = first_poisoned(first, dtype_size(spec.dtype)); e >= 0) {
      throw Error(where + " left output '" + spec.name + "' unwritten at " +
                  format_index(e, output.shape) + ": it must write every output element");
    }
    for (int call = 1; call < run.calls_completed; ++call) {
      const auto again = outputs->file.bytes(output.offset + call * run.output_bytes, output.bytes);
      OutputComparison agree =
          compare_output(spec.dtype, again, first, output.shape,
                         tolerance_for(task_.tolerance, spec.dtype, gate_case.workload.name));
      if (!agree.passed) {
        throw Error(where + " disagrees with itself between two calls on output '" + spec.name +
                    "': " + agree.failure + " - is it deterministic?");
      }
    }
  }
  return *cache_.emplace(key, std::move(outputs)).first->second;
}

void ReferenceOracle::provide(const Workload& workload, const std::vector<uint64_t>& seeds) {
  if (worker::provided_tensors(task_.signature).empty()) return;
  if (handle_ < 0) throw Error("reference oracle: no reference loaded");
  worker::ProvideRequest request;
  request.handle = handle_;
  request.signature = task_.signature;
  request.workload = workload;
  for (uint64_t seed : seeds) {
    if (!provided_.contains({workload.name, seed})) request.seeds.push_back(seed);
  }
  if (request.seeds.empty()) return;
  if (provided_dir_.empty()) {
    const std::string dir = scratch_.path() + "/provided";
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      throw Error("cannot make " + dir + ": " + std::strerror(errno));
    }
    provided_dir_ = dir;
  }
  request.dir = provided_dir_;
  const worker::ProvideResult result = worker_.provide(request, timeout_s_);
  if (result.verdict != Verdict::ok) {
    throw Error("the task's reference could not make the provided inputs of workload '" +
                workload.name + "': " + to_string(result.verdict) + ": " + result.message);
  }
  for (uint64_t seed : request.seeds) provided_.insert({workload.name, seed});
}

void ReferenceOracle::forget(const std::string& workload_name) {
  const auto of_workload = [&](const auto& entry) {
    return entry.first.rfind(workload_name + "/", 0) == 0;
  };
  std::erase_if(cache_, of_workload);
  std::erase_if(model_cache_, of_workload);
}

}  // namespace kforge::evaluation
