// The run directory: everything about one optimization run, written as it happens.
//
// Layout:
//   run.json                      configuration, device, toolchain, task hash (at start)
//   task.toml                     copy of the task file
//   events.jsonl                  one JSON object per event (candidate evaluated, best changed)
//   candidates/NNN-<variant>/     source, build.log, evaluation.json for each candidate
//   best.cpp | best.cu            the best kernel as a standalone source a user can take away
//   result.json                   written atomically: its presence means the run finished
//   solution.py                   a PyTorch problem's run, after result.json: a KernelBench
//                                 ModelNew running the best kernel (report/solution_export.h)
//   report.md                     human-readable summary
//   run.lock                      held (flock) by the one kforge process writing the run; holds
//                                 its pid
#pragma once

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>

#include <functional>

#include <nlohmann/json.hpp>

namespace kforge::report {

class RunDirectory {
 public:
  enum class Mode {
    create,  // a new run: the folder must not exist or be empty
    resume,  // an existing run (kforge optimize --resume): its files are kept, events appended
  };
  /// Creates `path` (and parents), or with Mode::resume opens it; a relative path is made
  /// absolute against the current directory, so every path this object returns is absolute.
  /// Throws Error if, to create, it exists and is not empty (a run never mixes with another's
  /// files), or, to resume, it is not a directory holding run.sqlite, or another process holds
  /// the run (run.lock: e.g. a resume started while the interrupted run still times its best).
  explicit RunDirectory(std::filesystem::path path, Mode mode = Mode::create);
  ~RunDirectory();
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// A new folder path()/candidates/NNN-<label>/ (NNN counts from 000), absolute.
  std::filesystem::path candidate_dir(int index, const std::string& label);
  /// Writes `text` to path()/relative atomically (temp file + rename).
  void write_text(const std::filesystem::path& relative, const std::string& text);
  void write_json(const std::filesystem::path& relative, const nlohmann::json& value);
  /// Appends one event line to events.jsonl and flushes it, then calls the event listener.
  void append_event(const nlohmann::json& event);
  /// Called with every event after it is on disk (e.g. to refresh report.html as the run goes);
  /// from the thread that appended it. Exceptions it throws are the appender's.
  void set_event_listener(std::function<void(const nlohmann::json&)> listener);

  /// A default path: runs/<task>-<UTC yyyymmdd-hhmmss>[-n] under `base`.
  static std::filesystem::path default_path(const std::filesystem::path& base,
                                            const std::string& task_name);

 private:
  std::filesystem::path path_;
  int lock_fd_ = -1;  // run.lock, flock'ed for this object's life
  std::mutex events_mutex_;
  std::ofstream events_;
  std::function<void(const nlohmann::json&)> listener_;
};

/// Current UTC time as ISO-8601 ("2026-11-29T10:17:36Z").
std::string utc_now_iso8601();

}  // namespace kforge::report
