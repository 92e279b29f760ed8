#include "worker/server.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace kforge::worker {
namespace {

using nlohmann::json;

int private_copy(int fd, const char* what) {
  // Above 2, so that the private descriptor is never one of the standard ones it replaces.
  const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (copy < 0) throw Error(std::string("cannot duplicate ") + what + ": " + std::strerror(errno));
  return copy;
}

bool write_all(int fd, const std::string& data) {
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

using AbiVersionFn = int (*)();

}  // namespace

Channels take_private_channels() {
  Channels channels;
  channels.request_fd = private_copy(0, "stdin");
  channels.response_fd = private_copy(1, "stdout");
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(2, 1) < 0) {
    throw Error(std::string("cannot redirect stdin/stdout: ") + std::strerror(errno));
  }
  ::close(null_fd);
  // Line-buffer what candidates print so it reaches the client's stderr tail promptly.
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return channels;
}

Server::Server(std::unique_ptr<DeviceBackend> backend) : backend_(std::move(backend)) {}

LoadResult Server::load(const LoadRequest& request) {
  LoadResult result;
  result.verdict = Verdict::wrong_signature;
  dlerror();
  void* library = dlopen(request.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    result.message = "cannot load " + request.path + ": " + (reason ? reason : "dlopen failed");
    return result;
  }
  auto entry = reinterpret_cast<KernelEntry>(dlsym(library, "kforge_run"));
  if (entry == nullptr) {
    result.message = request.path +
                     " does not export kforge_run (define it with KFORGE_API from kforge/kernel.h)";
    return result;
  }
  // Optional tag: a candidate built without kforge/kernel.h may lack it.
  if (auto abi = reinterpret_cast<AbiVersionFn>(dlsym(library, "kforge_abi_version"))) {
    const int version = abi();
    if (version != KFORGE_ABI_VERSION) {
      result.message = request.path + " was built against kforge ABI version " +
                       std::to_string(version) + "; this worker calls version " +
                       std::to_string(KFORGE_ABI_VERSION);
      return result;
    }
  }
  result.verdict = Verdict::ok;
  result.handle = next_handle_++;
  kernels_[result.handle] = entry;
  return result;
}

KernelEntry Server::kernel(int handle) const {
  auto found = kernels_.find(handle);
  if (found == kernels_.end()) throw Error("unknown kernel handle " + std::to_string(handle));
  return found->second;
}

json Server::dispatch(Command command, const json& request) {
  switch (command) {
    case Command::hello: {
      const auto hello = request.get<HelloRequest>();
      token_ = hello.token;
      if (!info_) info_ = backend_->info();
      if (hello.measure && info_->copy_bytes_per_s == 0) {
        info_->copy_bytes_per_s = backend_->measure_copy_bytes_per_s();
        info_->measured_flops_per_s = backend_->measure_flops_per_s();
      }
      return *info_;
    }
    case Command::load:
      return load(request.get<LoadRequest>());
    case Command::run: {
      const auto run = request.get<RunRequest>();
      return run_outputs(*backend_, kernel(run.handle), run);
    }
    case Command::time: {
      const auto time = request.get<TimeRequest>();
      if (time.baseline != "eager") {
        throw Error("time: baseline '" + time.baseline + "' is served by the torch reference "
                    "worker only (kforge-worker times the loaded kernel as given: baseline "
                    "'eager')");
      }
      return run_time(*backend_, kernel(time.handle), time, &timing_cache_);
    }
    case Command::provide:
      throw Error("kforge-worker cannot write provided inputs: only the reference worker of a "
                  "PyTorch task (python3 -m kforge_torch worker) runs the problem's get_inputs()");
    case Command::unload: {
      // The library stays mapped (a kernel may have left threads or callbacks in it); the
      // handle and the input sets timed for it go.
      const int handle = request.at("handle").get<int>();
      if (kernels_.erase(handle) == 0) throw Error("unknown kernel handle " + std::to_string(handle));
      timing_cache_ = {};
      return json::object();
    }
    case Command::shutdown:
      shutdown_ = true;
      return json::object();
  }
  throw Error("unhandled command");
}

std::string Server::handle_line(const std::string& line) {
  json reply;
  json id = nullptr;
  try {
    const json request = json::parse(line);
    if (!request.is_object()) throw Error("a request must be a JSON object");
    if (auto found = request.find("id"); found != request.end()) id = *found;
    const Command command = parse_command(request.at("cmd").get<std::string>());
    reply = dispatch(command, request);
    reply["ok"] = true;
  } catch (const std::exception& e) {
    reply = json{{"ok", false}, {"error", e.what()}};
  }
  reply["id"] = id;
  reply["token"] = token_;
  if (backend_->device_lost()) reply["exiting"] = true;
  // Messages may quote bytes from a candidate (paths, dlerror text): never fail on bad UTF-8.
  return reply.dump(-1, ' ', false, json::error_handler_t::replace);
}

int Server::serve(const Channels& channels) {
  std::string pending;
  char chunk[65536];
  while (!should_exit()) {
    const size_t newline = pending.find('\n');
    if (newline == std::string::npos) {
      const ssize_t n = ::read(channels.request_fd, chunk, sizeof chunk);
      if (n == 0) return 0;  // the client went away: nothing left to do
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return kWorkerExitHarnessError;
      pending.append(chunk, static_cast<size_t>(n));
      continue;
    }
    const std::string line = pending.substr(0, newline);
    pending.erase(0, newline + 1);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!write_all(channels.response_fd, handle_line(line) + "\n")) return kWorkerExitHarnessError;
  }
  return exit_code();
}

}  // namespace kforge::worker
