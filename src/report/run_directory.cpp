#include "report/run_directory.h"

#include <unistd.h>

#include <chrono>
#include <ctime>

#include "common/error.h"
#include "common/files.h"

namespace kforge::report {
namespace fs = std::filesystem;

namespace {

std::string utc_format(const char* format) {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, format, &utc);
  return buffer;
}

}  // namespace

std::string utc_now_iso8601() { return utc_format("%Y-%m-%dT%H:%M:%SZ"); }

RunDirectory::RunDirectory(fs::path path, Mode mode)
    : path_(fs::absolute(path).lexically_normal()) {
  std::error_code ec;
  if (mode == Mode::resume) {
    if (!fs::is_directory(path_)) {
      throw Error("--resume " + path_.string() + ": no such run directory");
    }
    if (!fs::exists(path_ / "run.sqlite")) {
      throw Error("--resume " + path_.string() + ": not a kforge run directory (no run.sqlite; "
                  "runs made before kforge recorded one cannot be resumed)");
    }
  } else if (fs::exists(path_) && !fs::is_empty(path_, ec)) {
    throw Error("run directory " + path_.string() +
                " already exists and is not empty (choose another --run-dir)");
  }
  fs::create_directories(path_ / "candidates", ec);
  if (ec) throw Error("cannot create run directory " + path_.string() + ": " + ec.message());
  events_.open(path_ / "events.jsonl", std::ios::app);
  if (!events_) throw Error("cannot write " + (path_ / "events.jsonl").string());
}

fs::path RunDirectory::candidate_dir(int index, const std::string& label) {
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%03d-", index);
  std::string safe;
  for (char c : label) safe.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  fs::path dir = path_ / "candidates" / (prefix + safe.substr(0, 48));
  fs::create_directories(dir);
  return dir;
}

void RunDirectory::write_text(const fs::path& relative, const std::string& text) {
  write_file_atomically(relative.is_absolute() ? relative : path_ / relative, text);
}

void RunDirectory::write_json(const fs::path& relative, const nlohmann::json& value) {
  write_text(relative, value.dump(2) + "\n");
}

void RunDirectory::append_event(const nlohmann::json& event) {
  std::lock_guard lock(events_mutex_);
  nlohmann::json stamped = event;
  stamped["time"] = utc_now_iso8601();
  events_ << stamped.dump() << '\n';
  events_.flush();
}

fs::path RunDirectory::default_path(const fs::path& base, const std::string& task_name) {
  fs::path path = base / (task_name + "-" + utc_format("%Y%m%d-%H%M%S"));
  for (int n = 2; fs::exists(path); ++n) {
    path = base / (task_name + "-" + utc_format("%Y%m%d-%H%M%S") + "-" + std::to_string(n));
  }
  return path;
}

}  // namespace kforge::report
