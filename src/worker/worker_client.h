// ProcessWorker: the real Worker, a spawned `kforge-worker` process driven over its pipes.
//
// Every exchange is bounded by a timeout. When the worker hangs (timeout), dies (EOF, signal) or
// answers garbage, its whole process group is killed and the call returns the verdict `timeout`
// or `worker_crashed` with a message naming the exit status and the tail of its stderr; the next
// call starts a fresh worker. Handles are the client's own numbers: ProcessWorker remembers the
// load request (path, task) behind each one and reloads it transparently in a respawned worker,
// so a caller's handles stay valid across crashes. Not thread-safe: one caller at a time (the pool owns one per device).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "process/subprocess.h"
#include "worker/sandbox.h"
#include "worker/worker.h"

namespace kforge::worker {

struct ProcessWorkerConfig {
  std::string worker_path;      // the kforge-worker binary
  /// Arguments between worker_path and `--backend B --device N`: a worker that is not
  /// kforge-worker, e.g. the PyTorch reference worker {"-m", "kforge_torch", "worker"} run by
  /// worker_path = a Python interpreter (task/torch_task.h).
  std::vector<std::string> worker_arguments;
  /// What messages call the worker ("kforge-worker cuda:0").
  std::string display_name = "kforge-worker";
  std::string backend = "cpu";  // "cpu" | "cuda"
  int device_index = 0;
  /// Spawn plus hello; creating a CUDA context can take seconds on a cold GPU.
  double startup_timeout_s = 60.0;
  /// How long a shutdown, or a worker announcing its exit, may take before it is killed.
  double exit_timeout_s = 5.0;
  /// Bytes of the worker's stderr kept for messages (a ring: the last ones).
  size_t stderr_tail_bytes = 8192;
  /// The worker's whole environment ("NAME=value"). When unset, scrubbed_environment(): a worker
  /// runs candidate code, so secrets (API keys, tokens) must never reach it.
  std::optional<std::vector<std::string>> environment;
  /// Resident memory (bytes) the worker may use; it is killed beyond it and the candidate in
  /// flight gets worker_crashed. 0 = 80% of physical memory.
  int64_t memory_limit_bytes = 0;
  /// Ask the worker to measure its device's copy bandwidth in hello (DeviceInfo); a few hundred
  /// ms per spawn, so only the worker whose numbers are used asks.
  bool measure_device = false;
  /// Wraps the worker in its sandbox (bubblewrap or unshare, see sandbox.h); unset = not wrapped.
  Sandbox sandbox;
  /// A fork server's socket (python/kforge_torch/fork_server.py; process/fork_client.h) to ask
  /// for the worker first, when it is a PyTorch worker and no launcher wraps it: the server
  /// forks it with torch imported, under the same sandbox and environment; when the server is
  /// absent or refuses, the worker is started as usual (a note on stderr says why, once); when
  /// a forked worker fails to start, it is started as usual, and so are its replacements.
  /// Empty: none.
  std::string fork_server;
  /// A command the worker runs under, outermost (e.g. a profiler: {"ncu", ...}); the worker's
  /// own command line follows it. Empty = none.
  std::vector<std::string> launcher;
  /// Called on the calling thread, before a new worker process is started to replace one that
  /// died or was killed (crash, timeout, killed from outside, device lost; not after shutdown()),
  /// with what happened to it, e.g. "kforge-worker cpu:0 exited between requests (killed by
  /// signal 9 (SIGKILL: Killed))". Unset: replaced without a word.
  std::function<void(const std::string& cause)> on_restart;
  /// Called once per request left unanswered for `slow_notice_s` seconds (0: never), on the
  /// calling thread while it waits, with the request's name ("run", "time"), the seconds waited
  /// and the request's timeout: a long wait (a hanging reference) is reported before it times out.
  double slow_notice_s = 0.0;
  std::function<void(const std::string& request, double waited_s, double timeout_s)> on_slow;
};

/// The environment a worker gets by default: only what running kernels needs (PATH, HOME, LANG
/// and LC_*, TMPDIR, LD_LIBRARY_PATH, CUDA_* and NVIDIA_* device selection, OMP_NUM_THREADS),
/// plus this process's CPU share: KFORGE_CPUS = usable_cpus() (common/cpus.h), and
/// OMP_NUM_THREADS = the same when it is not set, so that a worker inside a Slurm job whose
/// variables are dropped here, and the OpenMP threads of a cpu kernel, keep to the job's CPUs.
/// Everything else, API keys included, is dropped. Throws Error when $KFORGE_CPUS is malformed.
std::vector<std::string> scrubbed_environment();

class ProcessWorker final : public Worker {
 public:
  /// Does not start the process; the first call does (so constructing never throws).
  ProcessWorker(std::string worker_path, std::string backend, int device_index);
  explicit ProcessWorker(ProcessWorkerConfig config);
  /// Shuts the worker down (see shutdown()).
  ~ProcessWorker() override;
  ProcessWorker(const ProcessWorker&) = delete;
  ProcessWorker& operator=(const ProcessWorker&) = delete;

  /// The hello of the running worker (starting it if needed). Throws Error if it cannot start
  /// (binary missing, no device: the message carries the worker's stderr) or speaks another
  /// protocol version.
  DeviceInfo device_info() override;
  /// Starts the worker process now, on this thread, without waiting for its hello (the next
  /// call waits for it, on any thread). For a start that overlaps other work: a process must
  /// not be started on a thread that ends before it, since bubblewrap's --die-with-parent (a
  /// parent-death signal) follows the thread that started it, not the process. Throws as
  /// device_info() when the process cannot be started at all.
  void spawn();
  /// Loads `request.path` in the worker. On success `handle` is a client handle (>= 1) valid for
  /// the life of this object, across respawns. `timeout_s` bounds the exchange, in seconds.
  LoadResult load(const LoadRequest& request, double timeout_s) override;
  /// Handles in `request` are client handles; unknown ones throw Error. `timeout_s` bounds each
  /// exchange (the run, and any reload after a respawn); starting a worker uses the startup
  /// timeout instead. Throws Error on a harness error reported by the worker ({"ok": false}).
  /// A reply line without this session's token was forged by the candidate in flight: the
  /// worker is killed and the result carries the verdict rejected_by_policy.
  RunResult run(const RunRequest& request, double timeout_s) override;
  TimeResult time(const TimeRequest& request, double timeout_s) override;
  ProvideResult provide(const ProvideRequest& request, double timeout_s) override;
  /// Sends shutdown and reaps the worker (killing its group if it does not exit within
  /// exit_timeout_s). Idempotent, never throws; handles stay valid (a later call respawns).
  void shutdown() override;
  /// Forgets client handle `handle`: the running worker is asked (protocol `unload`) to drop the
  /// kernel or task and what it keeps for it (device memory, input sets), and a respawned worker
  /// will not load it again. Later calls on the handle throw Error. Idempotent; an unknown handle
  /// throws Error. Returns false (and keeps going) when the running worker could not do it: it
  /// crashed or timed out (then it is killed and respawned on the next call, which frees it all
  /// the same) or refused (`error` says why).
  bool unload(int handle, double timeout_s, std::string* error = nullptr);
  /// The client handles loaded and not unloaded, ascending.
  std::vector<int> loaded_handles() const;

  /// Process id of the running worker, or -1.
  int pid() const;
  /// True when the running worker was forked by config.fork_server.
  bool forked() const;
  /// How many worker processes this object has started.
  int spawn_count() const { return spawn_count_; }
  /// The last stderr_tail_bytes of the current (or last dead) worker's stderr.
  std::string stderr_tail() const;

 private:
  /// One exchange: the reply, or the verdict (timeout / worker_crashed) and message.
  struct Outcome {
    std::optional<nlohmann::json> reply;
    Verdict verdict = Verdict::ok;
    std::string message;
  };

  void ensure_started();
  /// Starting a worker, in two halves (spawn() may run the first on another thread): the
  /// process, and its hello request written...
  void spawn_process();
  /// ...then the hello's reply read and checked.
  void finish_start();
  Outcome exchange(Command command, nlohmann::json body, double timeout_s);
  /// The reply to request `id`, written at `start`, within `timeout_s` of it.
  Outcome read_reply(Command command, int64_t id, std::chrono::steady_clock::time_point start,
                     double timeout_s);
  std::string start_context() const;
  Outcome fail(Verdict verdict, const std::string& what);
  /// The typed result of an exchange; a failed exchange or a reply that does not decode (then
  /// the worker is killed) becomes a result carrying only the verdict and message.
  template <typename Result>
  Result decode(Outcome outcome, Command command);
  /// Drops the running process (killing its group first when `kill`); `cause` (non-empty) says
  /// why it is gone when that was not a shutdown(), for on_restart.
  void discard_process(bool kill, const std::string& cause);
  /// How a worker process ended, with a sandbox's 128 + N exit read as death by signal N.
  std::string describe_exit(const process::ExitStatus& status) const;
  std::optional<Outcome> resolve(int client_handle, double timeout_s, int* worker_handle);
  std::string describe() const;

  ProcessWorkerConfig config_;
  std::unique_ptr<process::Subprocess> process_;
  DeviceInfo info_;
  /// Client handle h -> handle_loads_[h - 1]; empty once unloaded.
  std::vector<std::optional<LoadRequest>> handle_loads_;
  std::map<int, int> worker_handles_;  // client handle -> handle in the running process
  std::string last_stderr_tail_;
  std::string lost_cause_;  // why the last process is gone, if not by shutdown(); see on_restart
  std::string token_;       // this worker process's session token (hello)
  int64_t next_request_id_ = 1;
  int spawn_count_ = 0;
  bool fork_refusal_noted_ = false;
  bool fork_abandoned_ = false;  // a forked worker failed to start: no more forks
  bool hello_pending_ = false;  // spawn_process() ran, finish_start() not yet
  std::chrono::steady_clock::time_point hello_started_;
  int64_t hello_id_ = 0;  // the note on a fork server that did not start it: once
};

}  // namespace kforge::worker
