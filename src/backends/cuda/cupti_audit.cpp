#include "backends/cuda/cupti_audit.h"

#include <cuda.h>
#include <cupti_activity.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "common/error.h"

namespace kforge::worker {
namespace {

/// The activity kinds that are work on a stream. CONCURRENT_KERNEL, unlike KERNEL, does not
/// serialize kernels, so a candidate's overlap is seen as it would happen untraced.
constexpr std::array<CUpti_ActivityKind, 3> kWorkKinds = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

const char* kind_name(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "MEMSET";
    default: return "another kind";
  }
}

/// One buffer holds ~4000 kernel records; CUPTI asks for more as it fills them. Records must be
/// 8-byte aligned (cupti_activity.h, CUpti_BuffersCallbackRequestFunc).
constexpr size_t kBufferBytes = size_t{1} << 20;
constexpr size_t kRecordAlignment = 8;

/// The CUPTI (and two driver) entry points, resolved once per process. Never destroyed: CUPTI's
/// own thread may deliver a buffer while the process exits.
struct Cupti {
  std::string error;  // why it cannot be used; "" when every entry point resolved
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&cuptiGetContextId) context_id = nullptr;
  decltype(&cuptiGetStreamIdEx) stream_id = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuStreamGetCtx) stream_context = nullptr;  // libcuda, already loaded by cudart
};

std::string describe(const Cupti& api, const std::string& call, CUptiResult result) {
  const char* text = nullptr;
  if (api.result_string == nullptr || api.result_string(result, &text) != CUPTI_SUCCESS) {
    text = nullptr;
  }
  return call + " failed: " + (text ? text : "CUptiResult " + std::to_string(result));
}

/// Work seen on one (context id, stream id) other than the allowed one.
struct ForeignWork {
  int kernels = 0;
  int memcpys = 0;
  int memsets = 0;
  std::string first_kernel;  // demangled, cut to a printable excerpt
};
using StreamKey = std::pair<uint32_t, uint32_t>;  // CUPTI context id, stream id in that context

/// What the buffer callbacks see; they run on CUPTI's thread or inside cuptiActivityFlushAll.
struct Collector {
  std::mutex mutex;
  bool window_open = false;
  StreamKey allowed{0, 0};
  std::map<StreamKey, ForeignWork> foreign;
  std::string record_error;  // a buffer that could not be read in the open window
};

Collector& collector() {
  static Collector* const instance = new Collector;  // never destroyed, as Cupti
  return *instance;
}

std::string printable_excerpt(const char* mangled) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  constexpr size_t kMaxChars = 100;  // a kernel name is candidate text: keep the message short
  if (name.size() > kMaxChars) name = name.substr(0, kMaxChars) + "...";
  for (char& c : name) c = (c >= 32 && c < 127) ? c : '?';
  return name;
}

void note(Collector& c, const CUpti_Activity* record) {
  ForeignWork* work = nullptr;
  const auto at = [&](uint32_t context, uint32_t stream) {
    const StreamKey key{context, stream};
    return key == c.allowed ? nullptr : &c.foreign[key];
  };
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if ((work = at(kernel->contextId, kernel->streamId)) == nullptr) return;
      ++work->kernels;
      if (work->first_kernel.empty() && kernel->name) {
        work->first_kernel = printable_excerpt(kernel->name);
      }
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      if ((work = at(copy->contextId, copy->streamId)) != nullptr) ++work->memcpys;
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* set = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      if ((work = at(set->contextId, set->streamId)) != nullptr) ++work->memsets;
      return;
    }
    default:
      return;
  }
}

const Cupti& cupti();

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kRecordAlignment, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;  // no buffer: CUPTI drops records, and end() says so
  *max_records = 0;                    // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  if (buffer == nullptr) return;
  const Cupti& api = cupti();
  Collector& c = collector();
  if (valid_bytes > 0) {
    std::lock_guard lock(c.mutex);
    CUpti_Activity* record = nullptr;
    for (;;) {
      const CUptiResult result = api.next_record(buffer, valid_bytes, &record);
      if (result == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // the end of the buffer
      if (result != CUPTI_SUCCESS) {
        if (c.window_open) c.record_error = describe(api, "cuptiActivityGetNextRecord", result);
        break;
      }
      if (c.window_open) note(c, record);
    }
  }
  std::free(buffer);
}

template <typename Fn>
void resolve(void* library, const char* symbol, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
}

/// The libcupti paths tried in order: the loader's search path (LD_LIBRARY_PATH reaches the
/// worker), the folder the build found it in, then the toolkits named by CUDA_HOME and
/// CUDA_PATH and the default one, in the layouts CUDA installs use.
std::vector<std::string> cupti_paths() {
  const std::string soname = "libcupti.so." + std::to_string(CUDA_VERSION / 1000);
  std::vector<std::string> paths = {soname};
  if (const std::string built = KFORGE_CUPTI_LIBRARY_DIR; !built.empty()) {
    paths.push_back(built + "/" + soname);
  }
  std::vector<std::string> roots;
  for (const char* variable : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = std::getenv(variable); root != nullptr && *root != '\0') {
      roots.push_back(root);
    }
  }
  roots.push_back("/usr/local/cuda");
  for (const std::string& root : roots) {
    for (const char* folder :
         {"/extras/CUPTI/lib64/", "/lib64/", "/lib/", "/targets/x86_64-linux/lib/"}) {
      paths.push_back(root + folder + soname);
    }
  }
  return paths;
}

Cupti load_cupti() {
  Cupti api;
  void* library = nullptr;
  std::string tried;
  for (const std::string& path : cupti_paths()) {
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library) break;
    tried += (tried.empty() ? "" : ", ") + path;
  }
  if (library == nullptr) {
    api.error = "libcupti not found (tried " + tried + ")";
    return api;
  }
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  std::string missing;
  resolve(library, "cuptiActivityEnable", api.enable, missing);
  resolve(library, "cuptiActivityDisable", api.disable, missing);
  resolve(library, "cuptiActivityFlushAll", api.flush_all, missing);
  resolve(library, "cuptiActivityGetNextRecord", api.next_record, missing);
  resolve(library, "cuptiActivityRegisterCallbacks", api.register_callbacks, missing);
  resolve(library, "cuptiActivityGetNumDroppedRecords", api.dropped_records, missing);
  resolve(library, "cuptiGetContextId", api.context_id, missing);
  resolve(library, "cuptiGetStreamIdEx", api.stream_id, missing);
  resolve(library, "cuptiGetResultString", api.result_string, missing);
  if (driver) resolve(driver, "cuStreamGetCtx", api.stream_context, missing);
  if (driver == nullptr) {
    api.error = "libcuda.so.1 could not be opened";
  } else if (!missing.empty()) {
    api.error = "libcupti lacks " + missing;
  } else if (const CUptiResult result = api.register_callbacks(buffer_requested, buffer_completed);
             result != CUPTI_SUCCESS) {
    api.error = describe(api, "cuptiActivityRegisterCallbacks", result);
  }
  return api;
}

const Cupti& cupti() {
  static const Cupti* const api = new Cupti(load_cupti());
  return *api;
}

std::string plural(int count, const char* noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

/// "2 kernels ('k(float*)') and 1 memset on stream 14", one clause per stream, "; " between.
std::string describe_foreign(const std::map<StreamKey, ForeignWork>& foreign, uint32_t context) {
  std::string text;
  for (const auto& [key, work] : foreign) {
    std::vector<std::string> parts;
    if (work.kernels > 0) {
      parts.push_back(plural(work.kernels, "kernel") +
                      (work.first_kernel.empty() ? "" : " ('" + work.first_kernel + "')"));
    }
    if (work.memcpys > 0) parts.push_back(plural(work.memcpys, "memcpy"));
    if (work.memsets > 0) parts.push_back(plural(work.memsets, "memset"));
    if (parts.empty()) continue;
    std::string clause = parts[0];
    for (size_t i = 1; i < parts.size(); ++i) {
      clause += (i + 1 == parts.size() ? " and " : ", ") + parts[i];
    }
    clause += " on stream " + std::to_string(key.second);
    if (key.first != context) clause += " of another CUDA context";
    text += (text.empty() ? "" : "; ") + clause;
  }
  return text;
}

}  // namespace

WorkAudit::~WorkAudit() {
  if (!open_) return;
  try {
    end();
  } catch (...) {  // the findings of a window nobody reads; the destructor must not throw
  }
}

bool WorkAudit::begin(void* stream) {
  if (open_) throw Error("work audit: begin() while a window is open");
  if (!unavailable_.empty()) return false;
  const Cupti& api = cupti();
  const auto give_up = [this](const std::string& why) {
    unavailable_ = why;
    static std::atomic<bool> reported{false};
    if (!reported.exchange(true)) {
      std::fprintf(stderr,
                   "kforge-worker: the work audit is unavailable (%s); work outside "
                   "args->stream is caught only by the host-clock cross-check\n",
                   why.c_str());
    }
    return false;
  };
  if (!api.error.empty()) return give_up(api.error);
  CUcontext context = nullptr;
  uint32_t context_id = 0, stream_id = 0;
  const auto cu_stream = static_cast<CUstream>(stream);
  if (const CUresult result = api.stream_context(cu_stream, &context); result != CUDA_SUCCESS) {
    return give_up("cuStreamGetCtx failed with CUresult " + std::to_string(result));
  }
  if (const CUptiResult result = api.context_id(context, &context_id); result != CUPTI_SUCCESS) {
    return give_up(describe(api, "cuptiGetContextId", result));
  }
  if (const CUptiResult result = api.stream_id(context, cu_stream, 0, &stream_id);
      result != CUPTI_SUCCESS) {
    return give_up(describe(api, "cuptiGetStreamIdEx", result));
  }
  Collector& c = collector();
  {
    std::lock_guard lock(c.mutex);
    c.window_open = true;
    c.allowed = {context_id, stream_id};
    c.foreign.clear();
    c.record_error.clear();
  }
  for (size_t i = 0; i < kWorkKinds.size(); ++i) {
    if (const CUptiResult result = api.enable(kWorkKinds[i]); result != CUPTI_SUCCESS) {
      for (size_t j = 0; j < i; ++j) api.disable(kWorkKinds[j]);
      std::lock_guard lock(c.mutex);
      c.window_open = false;
      return give_up(describe(
          api, std::string("cuptiActivityEnable(") + kind_name(kWorkKinds[i]) + ")", result));
    }
  }
  open_ = true;
  return true;
}

std::string WorkAudit::end() {
  if (!open_) return "";
  open_ = false;
  const Cupti& api = cupti();
  // Flushed before the kinds are disabled, so that no record of the window is left behind in a
  // buffer; forced, so that a buffer is delivered even if it is not full.
  std::string failure;
  if (const CUptiResult result = api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      result != CUPTI_SUCCESS) {
    failure = describe(api, "cuptiActivityFlushAll", result);
  }
  for (CUpti_ActivityKind kind : kWorkKinds) {
    const CUptiResult result = api.disable(kind);
    if (result != CUPTI_SUCCESS && failure.empty()) {
      failure = describe(api, std::string("cuptiActivityDisable(") + kind_name(kind) + ")", result);
    }
  }
  size_t dropped = 0;
  if (failure.empty()) {
    if (const CUptiResult result = api.dropped_records(nullptr, 0, &dropped);
        result != CUPTI_SUCCESS) {
      failure = describe(api, "cuptiActivityGetNumDroppedRecords", result);
    }
  }
  Collector& c = collector();
  std::map<StreamKey, ForeignWork> foreign;
  uint32_t context = 0;
  {
    std::lock_guard lock(c.mutex);
    c.window_open = false;
    foreign.swap(c.foreign);
    context = c.allowed.first;
    if (failure.empty()) failure = c.record_error;
  }
  if (!failure.empty()) throw Error("work audit: " + failure);
  if (dropped > 0) {
    throw Error("work audit: CUPTI dropped " + std::to_string(dropped) +
                " activity records (no buffer space), so the work outside args->stream is not "
                "known");
  }
  return describe_foreign(foreign, context);
}

}  // namespace kforge::worker
