#include "report/run_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
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
  // One writer per run: a second kforge on the same folder (a resume of a run still finishing)
  // would interleave its events and rewrite the other's results.
  const fs::path lock_path = path_ / "run.lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) {
    throw Error("cannot open " + lock_path.string() + ": " + std::strerror(errno));
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[32] = {};
    const ssize_t n = ::pread(lock_fd_, holder, sizeof holder - 1, 0);
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err == EWOULDBLOCK) {
      throw Error("run directory " + path_.string() + " is in use by another kforge process" +
                  (n > 0 ? " (pid " + std::string(holder, static_cast<size_t>(n)) + ")" : "") +
                  "; wait for it to finish (an interrupted run still times its best) and try again");
    }
    throw Error("cannot lock " + lock_path.string() + ": " + std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(lock_fd_, 0) != 0 ||
      ::pwrite(lock_fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The pid only improves the message a second process prints; the lock is what matters.
  }
  events_.open(path_ / "events.jsonl", std::ios::app);
  if (!events_) throw Error(cannot_write(path_ / "events.jsonl"));
}

RunDirectory::~RunDirectory() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock; run.lock stays (harmless)
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
  nlohmann::json stamped = event;
  std::function<void(const nlohmann::json&)> listener;
  {
    std::lock_guard lock(events_mutex_);
    stamped["time"] = utc_now_iso8601();
    events_ << stamped.dump() << '\n';
    events_.flush();
    listener = listener_;
  }
  if (listener) listener(stamped);
}

void RunDirectory::set_event_listener(std::function<void(const nlohmann::json&)> listener) {
  std::lock_guard lock(events_mutex_);
  listener_ = std::move(listener);
}

fs::path RunDirectory::default_path(const fs::path& base, const std::string& task_name) {
  fs::path path = base / (task_name + "-" + utc_format("%Y%m%d-%H%M%S"));
  for (int n = 2; fs::exists(path); ++n) {
    path = base / (task_name + "-" + utc_format("%Y%m%d-%H%M%S") + "-" + std::to_string(n));
  }
  return path;
}

}  // namespace kforge::report
