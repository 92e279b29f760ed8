#include "worker/worker_client.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <utility>

#include "common/cpus.h"
#include "common/error.h"

namespace kforge::worker {
namespace {

using nlohmann::json;

/// How much of the worker's stderr goes into a verdict message: enough for a backtrace or a
/// CUDA error, short enough for a prompt.
constexpr size_t kMessageTailBytes = 2000;
/// How long a worker that closed its result channel gets to finish dying before it is killed.
constexpr double kDeathGraceSeconds = 2.0;

std::string tail_for_message(const std::string& tail) {
  if (tail.empty()) return "";
  const std::string cut =
      tail.size() > kMessageTailBytes ? "..." + tail.substr(tail.size() - kMessageTailBytes) : tail;
  return "; stderr: " + cut;
}

/// 32 random hex digits from the system's entropy source.
std::string random_token() {
  std::random_device device;
  std::string token;
  for (int i = 0; i < 4; ++i) {
    char chunk[9];
    std::snprintf(chunk, sizeof chunk, "%08x", static_cast<unsigned>(device()));
    token += chunk;
  }
  return token;
}

/// Resident set size in bytes of process `pid` and all its descendants (a sandboxed worker is
/// a child of bwrap), from /proc/PID/statm and /proc/PID/task/*/children; 0 if unreadable.
int64_t resident_bytes(int pid, int depth = 0) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  int64_t size_pages = 0, resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return 0;
  int64_t total = resident_pages * sysconf(_SC_PAGESIZE);
  if (depth > 8) return total;
  std::error_code error;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", error)) {
    std::ifstream children(task.path() / "children");
    for (int child = 0; children >> child;) total += resident_bytes(child, depth + 1);
  }
  return total;
}

std::string format_gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

std::string format_seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

}  // namespace

std::vector<std::string> scrubbed_environment() {
  static const char* const kExact[] = {"PATH", "HOME", "LANG", "TMPDIR", "LD_LIBRARY_PATH",
                                       "OMP_NUM_THREADS", "TZ"};
  static const char* const kPrefixes[] = {"LC_", "CUDA_", "NVIDIA_"};
  std::vector<std::string> kept;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    bool keep = std::any_of(std::begin(kExact), std::end(kExact),
                            [&](const char* exact) { return name == exact; });
    keep = keep || std::any_of(std::begin(kPrefixes), std::end(kPrefixes), [&](const char* p) {
             return name.rfind(p, 0) == 0;
           });
    if (keep) kept.push_back(text);
  }
  const std::string cpus = std::to_string(usable_cpus());
  kept.push_back("KFORGE_CPUS=" + cpus);
  if (std::getenv("OMP_NUM_THREADS") == nullptr) kept.push_back("OMP_NUM_THREADS=" + cpus);
  return kept;
}

ProcessWorker::ProcessWorker(std::string worker_path, std::string backend, int device_index) {
  config_.worker_path = std::move(worker_path);
  config_.backend = std::move(backend);
  config_.device_index = device_index;
}

ProcessWorker::ProcessWorker(ProcessWorkerConfig config) : config_(std::move(config)) {}

ProcessWorker::~ProcessWorker() { shutdown(); }

std::string ProcessWorker::describe() const {
  return config_.display_name + " " + config_.backend + ":" + std::to_string(config_.device_index);
}

int ProcessWorker::pid() const { return process_ ? process_->pid() : -1; }

bool ProcessWorker::forked() const { return process_ && process_->forked(); }

std::string ProcessWorker::stderr_tail() const {
  return process_ ? process_->stderr_tail() : last_stderr_tail_;
}

std::string ProcessWorker::describe_exit(const process::ExitStatus& status) const {
  // bwrap, and the shell inside the unshare sandbox, exit with 128 + N when the worker died by
  // signal N.
  return (config_.sandbox.available ? process::unwrap_signal_exit(status) : status).describe();
}

void ProcessWorker::discard_process(bool kill, const std::string& cause) {
  if (!process_) return;
  if (kill) process_->kill();
  lost_cause_ = cause;
  last_stderr_tail_ = process_->stderr_tail();
  process_.reset();
  hello_pending_ = false;
  worker_handles_.clear();  // handles died with the process
}

void ProcessWorker::ensure_started() {
  // A worker that died between calls (announced exit, killed from outside) is replaced quietly:
  // no candidate was running in it.
  if (process_ && !hello_pending_) {
    if (std::optional<process::ExitStatus> status = process_->poll_exit()) {
      discard_process(false,
                      describe() + " exited between requests (" + describe_exit(*status) + ")");
    }
  }
  if (!process_) spawn_process();
  if (hello_pending_) finish_start();
}

void ProcessWorker::spawn() {
  if (!process_) spawn_process();
}

std::string ProcessWorker::start_context() const {
  return "cannot start " + describe() + " (" + config_.worker_path + ")";
}

void ProcessWorker::spawn_process() {
  process::SpawnOptions options;
  options.argv = config_.launcher;
  if (config_.sandbox.available) {
    options.argv.insert(options.argv.end(), config_.sandbox.argv_prefix.begin(),
                        config_.sandbox.argv_prefix.end());
  }
  options.argv.push_back(config_.worker_path);
  options.argv.insert(options.argv.end(), config_.worker_arguments.begin(),
                      config_.worker_arguments.end());
  for (const std::string& arg : {std::string("--backend"), config_.backend,
                                 std::string("--device"), std::to_string(config_.device_index)}) {
    options.argv.push_back(arg);
  }
  options.environment = config_.environment ? config_.environment : scrubbed_environment();
  options.stderr_tail_bytes = config_.stderr_tail_bytes;
  const std::string context = start_context();
  if (spawn_count_ > 0 && !lost_cause_.empty() && config_.on_restart) {
    config_.on_restart(lost_cause_);
  }
  lost_cause_.clear();
  if (!config_.fork_server.empty() && config_.launcher.empty() && !fork_abandoned_) {
    process::ForkRequest fork;
    fork.socket_path = config_.fork_server;
    fork.argv.assign(config_.worker_arguments.begin(), config_.worker_arguments.end());
    fork.argv.insert(fork.argv.end(), {"--backend", config_.backend, "--device",
                                       std::to_string(config_.device_index)});
    fork.sandbox = config_.sandbox.available ? config_.sandbox.mechanism : "";
    options.fork_server = std::move(fork);
  }
  process_ = with_context(context, [&] { return std::make_unique<process::Subprocess>(options); });
  if (!process_->fork_refusal().empty() && !fork_refusal_noted_) {
    fork_refusal_noted_ = true;
    std::cerr << "kforge: note: " << describe() << " started without the fork server at "
              << config_.fork_server << ": " << process_->fork_refusal() << "\n";
  }
  ++spawn_count_;
  token_ = random_token();
  hello_pending_ = true;
  hello_started_ = std::chrono::steady_clock::now();
  hello_id_ = next_request_id_++;
  json body = HelloRequest{token_, config_.measure_device};
  body["cmd"] = to_string(Command::hello);
  body["id"] = hello_id_;
  // A pipe this new takes a hello line at once; one that does not is a dead worker, which the
  // reply's read reports.
  process_->write_line(body.dump(), config_.startup_timeout_s);
}

void ProcessWorker::finish_start() {
  hello_pending_ = false;
  const std::string context = start_context();
  const bool forked = process_ && process_->forked();
  const Outcome hello =
      read_reply(Command::hello, hello_id_, hello_started_, config_.startup_timeout_s);
  if (!hello.reply && forked) {
    // What a forked worker cannot do (a device the server's imports spoiled for its children,
    // say) a started one may: this worker is started on its own from now on.
    fork_abandoned_ = true;
    lost_cause_.clear();  // a second try at the start, not a restart
    std::cerr << "kforge: note: " << describe() << " forked by the server at "
              << config_.fork_server << " did not start (" << hello.message
              << "); starting it on its own\n";
    spawn_process();
    finish_start();
    return;
  }
  if (!hello.reply) throw Error(context + ": " + hello.message);
  DeviceInfo info = with_context(context, [&] { return hello.reply->get<DeviceInfo>(); });
  if (info.protocol_version != kProtocolVersion) {
    discard_process(true, "");
    throw Error(context + ": it speaks protocol version " + std::to_string(info.protocol_version) +
                ", this kforge speaks " + std::to_string(kProtocolVersion));
  }
  info_ = std::move(info);
}

ProcessWorker::Outcome ProcessWorker::fail(Verdict verdict, const std::string& what) {
  Outcome outcome;
  outcome.verdict = verdict;
  if (verdict == Verdict::timeout) {
    discard_process(true, what + "; its process group was killed");
    outcome.message = what + "; its process group was killed" + tail_for_message(last_stderr_tail_);
    return outcome;
  }
  std::optional<process::ExitStatus> status = process_->wait(kDeathGraceSeconds);
  if (!status) status = process_->kill();
  const std::string cause = what + " (worker " + describe_exit(*status) + ")";
  discard_process(false, cause);
  outcome.message = cause + tail_for_message(last_stderr_tail_);
  return outcome;
}

ProcessWorker::Outcome ProcessWorker::exchange(Command command, json body, double timeout_s) {
  const std::string name = to_string(command);
  const int64_t id = next_request_id_++;
  const auto start = std::chrono::steady_clock::now();
  body["cmd"] = name;
  body["id"] = id;
  if (!process_->write_line(body.dump(-1, ' ', false, json::error_handler_t::replace), timeout_s)) {
    return fail(Verdict::worker_crashed, describe() + " did not take the " + name + " request");
  }
  return read_reply(command, id, start, timeout_s);
}

ProcessWorker::Outcome ProcessWorker::read_reply(Command command, int64_t id,
                                                 std::chrono::steady_clock::time_point start,
                                                 double timeout_s) {
  const std::string name = to_string(command);
  int64_t limit = config_.memory_limit_bytes;
  if (limit <= 0) limit = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / 5 * 4;
  int forged_lines = 0;
  std::string forged_example;
  bool slow_noticed = false;  // on_slow is called once per request
  json reply;
  while (true) {
    // One budget for the whole exchange: what the write took is not given again to the read.
    // It is read in slices so that the worker's memory can be watched meanwhile.
    const double waited_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double left_s = timeout_s - waited_s;
    if (config_.on_slow && config_.slow_notice_s > 0.0 && waited_s >= config_.slow_notice_s &&
        !slow_noticed) {
      slow_noticed = true;
      config_.on_slow(name, waited_s, timeout_s);
    }
    std::string line;
    const process::ReadStatus status = process_->read_line(&line, std::min(left_s, 0.1));
    if (status == process::ReadStatus::timeout) {
      if (const int64_t resident = resident_bytes(process_->pid()); resident > limit) {
        const std::string cause = describe() + " used " + format_gib(resident) +
                                  " of memory during " + name + ", over its limit of " +
                                  format_gib(limit) + "; its process group was killed";
        discard_process(true, cause);
        Outcome outcome;
        outcome.verdict = Verdict::worker_crashed;
        outcome.message = cause + tail_for_message(last_stderr_tail_);
        return outcome;
      }
      if (left_s > 0.1) continue;
      return fail(Verdict::timeout, describe() + " gave no answer to " + name + " within " +
                                        format_seconds(timeout_s) + " s");
    }
    if (status == process::ReadStatus::eof) {
      return fail(Verdict::worker_crashed, describe() + " died during " + name);
    }
    if (status == process::ReadStatus::overflow) {
      return fail(Verdict::worker_crashed, describe() + " sent an overlong line during " + name);
    }
    reply = json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool genuine = reply.is_object() && reply.value("token", json()) == json(token_) &&
                         !token_.empty();
    if (genuine || command == Command::hello) {
      if (!reply.is_object() || reply.value("id", json()) != json(id) || !reply.contains("ok") ||
          !reply.at("ok").is_boolean()) {
        discard_process(true, describe() + " answered " + name + " with garbage");
        Outcome outcome;
        outcome.verdict = Verdict::worker_crashed;
        outcome.message = describe() + " answered " + name + " with garbage: " +
                          line.substr(0, 200) + tail_for_message(last_stderr_tail_);
        return outcome;
      }
      break;
    }
    // Not signed with this session's token: something in the worker (the candidate) wrote it.
    if (forged_lines++ == 0) forged_example = line.substr(0, 120);
  }
  if (forged_lines > 0) {
    discard_process(true, describe() + " was killed: the candidate forged lines on its channel");
    Outcome outcome;
    outcome.verdict = Verdict::rejected_by_policy;
    outcome.message = "the candidate wrote " + std::to_string(forged_lines) +
                      " forged line(s) to kforge's private result channel during " + name +
                      " (first: " + forged_example + "); the worker was killed";
    return outcome;
  }
  if (reply.value("exiting", false)) {
    // Sticky device error: the worker exits after this reply; reap it now, respawn next call.
    if (!process_->wait(config_.exit_timeout_s)) process_->kill();
    discard_process(false, describe() + " exited after a device error it cannot recover from");
  }
  if (!reply.at("ok").get<bool>()) {
    throw Error(describe() + " refused " + name + ": " + reply.value("error", "no reason given"));
  }
  return Outcome{std::move(reply), Verdict::ok, ""};
}

template <typename Result>
Result ProcessWorker::decode(Outcome outcome, Command command) {
  if (outcome.reply) {
    try {
      return outcome.reply->get<Result>();
    } catch (const std::exception& e) {
      outcome.verdict = Verdict::worker_crashed;
      outcome.message =
          describe() + " answered " + to_string(command) + " with a malformed reply: " + e.what();
      discard_process(true, outcome.message);
    }
  }
  Result failed;
  failed.verdict = outcome.verdict;
  failed.message = outcome.message;
  return failed;
}

DeviceInfo ProcessWorker::device_info() {
  ensure_started();
  return info_;
}

LoadResult ProcessWorker::load(const LoadRequest& request, double timeout_s) {
  ensure_started();
  LoadResult result =
      decode<LoadResult>(exchange(Command::load, request, timeout_s), Command::load);
  if (result.verdict != Verdict::ok) {
    result.handle = -1;
    return result;
  }
  handle_loads_.push_back(request);
  const int client_handle = static_cast<int>(handle_loads_.size());
  if (process_) worker_handles_[client_handle] = result.handle;
  result.handle = client_handle;
  return result;
}

std::optional<ProcessWorker::Outcome> ProcessWorker::resolve(int client_handle, double timeout_s,
                                                             int* worker_handle) {
  if (client_handle < 1 || client_handle > static_cast<int>(handle_loads_.size())) {
    throw Error("unknown kernel handle " + std::to_string(client_handle) + " for " + describe());
  }
  if (!handle_loads_[client_handle - 1]) {
    throw Error("kernel handle " + std::to_string(client_handle) + " of " + describe() +
                " was unloaded");
  }
  ensure_started();
  if (auto found = worker_handles_.find(client_handle); found != worker_handles_.end()) {
    *worker_handle = found->second;
    return std::nullopt;
  }
  const LoadRequest& original = *handle_loads_[client_handle - 1];
  const std::string& path = original.path;
  const LoadResult reloaded =
      decode<LoadResult>(exchange(Command::load, original, timeout_s), Command::load);
  if (reloaded.verdict == Verdict::worker_crashed || reloaded.verdict == Verdict::timeout) {
    return Outcome{std::nullopt, reloaded.verdict, reloaded.message};
  }
  if (reloaded.verdict != Verdict::ok) {
    throw Error("cannot reload " + path + " (handle " + std::to_string(client_handle) +
                ") in a respawned " + describe() + ": " + reloaded.message);
  }
  worker_handles_[client_handle] = reloaded.handle;
  *worker_handle = reloaded.handle;
  return std::nullopt;
}

RunResult ProcessWorker::run(const RunRequest& request, double timeout_s) {
  RunRequest sent = request;
  if (auto failure = resolve(request.handle, timeout_s, &sent.handle)) {
    return decode<RunResult>(std::move(*failure), Command::load);
  }
  return decode<RunResult>(exchange(Command::run, sent, timeout_s), Command::run);
}

TimeResult ProcessWorker::time(const TimeRequest& request, double timeout_s) {
  TimeRequest sent = request;
  if (auto failure = resolve(request.handle, timeout_s, &sent.handle)) {
    return decode<TimeResult>(std::move(*failure), Command::load);
  }
  return decode<TimeResult>(exchange(Command::time, sent, timeout_s), Command::time);
}

ProvideResult ProcessWorker::provide(const ProvideRequest& request, double timeout_s) {
  ProvideRequest sent = request;
  if (auto failure = resolve(request.handle, timeout_s, &sent.handle)) {
    return decode<ProvideResult>(std::move(*failure), Command::load);
  }
  return decode<ProvideResult>(exchange(Command::provide, sent, timeout_s), Command::provide);
}

bool ProcessWorker::unload(int handle, double timeout_s, std::string* error) {
  if (handle < 1 || handle > static_cast<int>(handle_loads_.size())) {
    throw Error("unknown kernel handle " + std::to_string(handle) + " for " + describe());
  }
  if (!handle_loads_[handle - 1]) return true;
  handle_loads_[handle - 1].reset();
  const auto mapped = worker_handles_.find(handle);
  if (mapped == worker_handles_.end()) return true;  // not in this process: nothing to free
  const int worker_handle = mapped->second;
  worker_handles_.erase(mapped);
  if (!process_) return true;
  try {
    const Outcome outcome = exchange(Command::unload, json{{"handle", worker_handle}}, timeout_s);
    if (outcome.verdict == Verdict::ok) return true;
    if (error != nullptr) *error = outcome.message;
  } catch (const Error& e) {  // {"ok": false}: e.g. a worker of an older kforge
    if (error != nullptr) *error = e.what();
  }
  return false;
}

std::vector<int> ProcessWorker::loaded_handles() const {
  std::vector<int> handles;
  for (size_t i = 0; i < handle_loads_.size(); ++i) {
    if (handle_loads_[i]) handles.push_back(static_cast<int>(i) + 1);
  }
  return handles;
}

void ProcessWorker::shutdown() {
  lost_cause_.clear();  // a deliberate end: the next start is no restart
  if (!process_) return;
  try {
    if (!process_->poll_exit()) {
      process_->write_line(json{{"cmd", "shutdown"}, {"id", next_request_id_++}}.dump(),
                           config_.exit_timeout_s);
      process_->close_stdin();
    }
    if (!process_->wait(config_.exit_timeout_s)) process_->kill();
  } catch (...) {
    // shutdown must not throw: kill below is the fallback
  }
  discard_process(true, "");
}

}  // namespace kforge::worker
