#include "evaluation/source_policy.h"

#include <algorithm>
#include <regex>
#include <set>
#include <utility>

#include "backends/backend.h"
#include "common/error.h"
#include "evaluation/source_text.h"

namespace kforge::evaluation {
namespace {

// libstdc++ matches by recursion, one level per character consumed, so every repetition in these
// patterns is bounded: whitespace runs are collapsed to one character before matching (see
// prepare_source), and identifier tails use \w{0,40}. An untrusted source cannot then overflow the
// stack.
struct RuleSpec {
  PolicyCategory category;
  std::string pattern;  // ECMAScript; capture group 1, when present, is the place to report
  const char* why;
};

// `#include <...>` (also the %: digraph, include_next and import) of a header named by `names`.
std::string include_of(const std::string& names) {
  return R"re((?:#|%:)\s*(?:include|include_next|import)\s*[<"]\s*(?:)re" + names + ")";
}

// A call of one of `names` that is not a member call (`x.open(`, `p->exit(`); `suffix` follows.
std::string call_of(const std::string& names, const std::string& suffix = "") {
  return R"re((?:^|[^\w.>]|[^-]>)\b()re" + names + R"re()\s*\()re" + suffix;
}

std::vector<RuleSpec> rule_specs() {
  using C = PolicyCategory;
  const char* kReachesOut =
      "reaches outside the kernel (paths, programs, dynamic loading, network); a kernel reads "
      "only its tensors and scalars";
  return {
      {C::library_compute,
       include_of(R"re(cublas|cudnn|cufft|cusparse|cusolver|cutensor|cutlass/|cute/|thrust/|)re"
                  R"re(cub/device/|torch/|ATen/|c10/|cblas|lapacke|openblas|Eigen/|)re"
                  R"re(unsupported/Eigen/|mkl|dnnl|oneapi/dnnl|mkldnn)re"),
       "includes a vendor compute library; the candidate must compute the result itself"},
      {C::library_compute,
       R"re(\b(?:cublas|cudnn|cufft|cusparse|cusolver|cutensor|CUBLAS|CUDNN|CUFFT|CUSPARSE|)re"
       R"re(CUSOLVER|CUTENSOR)|\b(?:cutlass|cute|thrust)\s*::|\bcub\s*::\s*(?:Device|Dispatch)|)re"
       R"re(\bDevice(?:Reduce|Scan|RadixSort|Segmented\w{0,10}|MergeSort|Select|Partition|)re"
       R"re(Histogram|RunLengthEncode|Spmv|AdjacentDifference|Copy|Memcpy|Transform|For)\s*::)re",
       "calls a CUDA library (cuBLAS, cuDNN, CUTLASS, Thrust, CUB device-wide algorithms, ...); "
       "write the kernel itself (block- and warp-level CUB primitives are fine)"},
      {C::library_compute,
       R"re(\b(?:at|torch|c10|Eigen)\s*::|\bcblas_|\bLAPACKE_|\b[sdcz](?:gemm|gemv|symm|symv|)re"
       R"re(syrk|syr2k|trmm|trmv|trsm|trsv|axpy|dot|dotc|dotu|scal|nrm2|asum|ger|gerc|geru)_\b|)re"
       R"re(\b(?:mkl|MKL|Mkl)_|\b(?:dnnl|mkldnn)(?:\s*::|_)|\bnamespace\s+(?:\w{1,40}\s*=\s*)re"
       R"re((?:::\s*)?)?(?:cutlass|cute|thrust|at|torch|c10|Eigen|dnnl)\b)re",
       "uses a compute library (ATen, BLAS, Eigen, MKL, oneDNN, ...); write the kernel itself"},

      {C::thread_creation,
       include_of(R"re((?:thread|future|pthread\.h|threads\.h|spawn\.h|execution)\s*[>"]|)re"
                  R"re(tbb/|oneapi/tbb)re"),
       "includes a threading header; parallelize with `#pragma omp parallel for` or more blocks"},
      {C::thread_creation,
       R"re(\bstd\s*::\s*(?:thread|jthread|async)\b|\blaunch\s*::\s*async\b|\b(?:pthread_create|)re"
       R"re(thrd_create|vfork|posix_spawnp?|clone3|__clone)\b|\bstd\s*::\s*execution\s*::\s*)re"
       R"re(par(?:_unseq)?\b|\btbb\s*::|\bnamespace\s+(?:\w{1,40}\s*=\s*(?:::\s*)?)?tbb\b)re",
       "starts a thread or process; parallelize with `#pragma omp parallel for` (cpu) or more "
       "blocks (cuda)"},
      {C::thread_creation, call_of("fork|clone"), "creates a process"},

      {C::stream_creation,
       R"re(\bcu(?:da)?Stream(?:Create|Destroy)|\bcudaStream(?:PerThread|Legacy)\b|)re"
       R"re(\bCU_STREAM_(?:PER_THREAD|LEGACY)\b)re",
       "creates, destroys or names another CUDA stream; launch on args->stream so the timing "
       "sees the work"},
      {C::stream_creation,
       R"re(\bcu(?:da)?Graph(?:Launch|Instantiate|Create)|\bcu(?:da)?StreamBeginCapture)re",
       "builds or launches a CUDA graph; launch the kernels directly on args->stream"},
      {C::stream_creation, R"re(\bcu(?:da)?(?:LaunchHostFunc|StreamAddCallback)\b)re",
       "runs host code from a stream"},
      {C::stream_creation,
       R"re(\bcu(?:da)?Event(?:Create|Record|Synchronize|ElapsedTime|Query|Destroy)|)re"
       R"re(\bcu(?:da)?StreamWaitEvent\b)re",
       "uses CUDA events; the timing events belong to kforge"},

      {C::default_stream_launch, R"re(\b(cu(?:da)?Mem(?:cpy|set)(?!\w{0,40}Async)\w{0,40})\s*\()re",
       "copies or sets memory synchronously on the default stream; use cudaMemcpyAsync or "
       "cudaMemsetAsync on args->stream"},
      {C::default_stream_launch,
       R"re(\b(?:cudaDeviceSynchronize|cudaThreadSynchronize|cuCtxSynchronize)\b)re",
       "synchronizes the whole device; kforge synchronizes args->stream itself"},

      {C::l2_persistence,
       R"re((?:AccessPolicyWindow|accessPolicyWindow|ACCESS_POLICY_WINDOW)|)re"
       R"re(\bcu(?:da)?StreamSetAttribute\b|\bcudaLimitPersistingL2CacheSize\b|)re"
       R"re(\bCU_LIMIT_PERSISTING_L2_CACHE_SIZE\b|\bcu(?:da)?CtxResetPersistingL2Cache\b|)re"
       R"re(\bcudaAccessProperty|\bCU_ACCESS_PROPERTY_|\b(?:hitRatio|hitProp|missProp)\b|)re"
       R"re(\bcu(?:da)?DeviceSetLimit\b|\bcuCtxSetLimit\b)re",
       "sets an L2 persistence policy or a device limit; data kept in L2 across calls defeats "
       "the cold-cache timing"},
      {C::l2_persistence, R"re(\bcreatepolicy\b|\bevict_last\b)re",
       "sets a PTX L2 cache policy; evict_last lines can survive kforge's L2 flush"},

      {C::file_and_environment,
       include_of(R"re((?:fstream|filesystem|fcntl\.h|dlfcn\.h|sys/socket\.h|sys/un\.h|)re"
                  R"re(netinet/\w{1,20}\.h|arpa/\w{1,20}\.h|netdb\.h|sys/mman\.h)\s*[>"])re"),
       kReachesOut},
      {C::file_and_environment,
       R"re(\b(?:fopen|fopen64|freopen|fdopen|tmpfile|mkstemp|mkostemp|tmpnam)\b|)re"
       R"re(\b(?:basic_)?[io]?fstream\b|\b(?:basic_)?filebuf\b|\bstd\s*::\s*filesystem\b)re",
       "opens a file; a kernel reads only its tensors"},
      {C::file_and_environment, call_of("open|open64|openat|openat2|creat|creat64"),
       "opens a file; a kernel reads only its tensors"},
      {C::file_and_environment,
       R"re(\b(?:secure_getenv|getenv|setenv|unsetenv|putenv|clearenv|environ|_environ|)re"
       R"re(__environ)\b)re",
       "reads or changes the environment; parameters come from the task's scalars"},
      {C::file_and_environment,
       R"re(/(?:proc|dev|sys)/|\b(?:readlink|readlinkat|realpath|dlopen|dlmopen|dlsym|dlvsym|)re"
       R"re(popen|execl|execlp|execle|execv|execvp|execvpe|execve|execveat|fexecve|)re"
       R"re(getaddrinfo|gethostbyname)\b)re",
       kReachesOut},
      {C::file_and_environment, call_of("system|socket|connect|dup|dup2|dup3"), kReachesOut},
      {C::file_and_environment,
       call_of("write|pwrite|writev|read|pread|readv|ioctl|fcntl|close|lseek|fsync",
               R"re(\s*(?:\d|STD(?:IN|OUT|ERR)_FILENO\b))re"),
       "uses a raw file descriptor; the worker's standard streams belong to kforge"},

      {C::process_control, call_of("exit|abort|signal|kill|raise|alarm|terminate"),
       "ends or signals the process; return a non-zero code from kforge_run instead"},
      {C::process_control,
       R"re(\b(?:_exit|_Exit|quick_exit|at_quick_exit|atexit|set_terminate|sigaction|)re"
       R"re(sigprocmask|pthread_sigmask|setjmp|_setjmp|sigsetjmp|longjmp|_longjmp|siglongjmp|)re"
       R"re(ptrace|prctl|setrlimit|prlimit|prlimit64|tgkill|tkill|killpg|setitimer|)re"
       R"re(cudaDeviceReset|cuDevicePrimaryCtxReset\w{0,8})\b|\bcuCtxDestroy)re",
       "controls the process or its CUDA context (exit handlers, signals, jumps, limits)"},
      {C::process_control,
       include_of(R"re((?:csetjmp|setjmp\.h|csignal|signal\.h|sys/ptrace\.h|sys/prctl\.h|)re"
                  R"re(sys/resource\.h|sys/syscall\.h)\s*[>"])re"),
       "includes a process-control header"},
      {C::process_control, R"re(\b(?:syscall|sysenter)\b|\b__NR_|\bSYS_\w|\bint\s+\$?0x80\b)re",
       "makes a raw system call"},
  };
}

struct Rule {
  PolicyCategory category;
  std::regex regex;
  std::string why;
};

const std::vector<Rule>& builtin_rules() {
  static const std::vector<Rule> rules = [] {
    std::vector<Rule> compiled;
    for (RuleSpec& spec : rule_specs()) {
      compiled.push_back({spec.category, std::regex(spec.pattern), spec.why});
    }
    return compiled;
  }();
  return rules;
}

// A match at `position` of the prepared text (then of the original source).
struct Hit {
  PolicyCategory category;
  size_t position;
  std::string why;
};

void find_all(const std::regex& regex, const std::string& text, PolicyCategory category,
              const std::string& why, std::vector<Hit>& hits) {
  for (auto it = std::sregex_iterator(text.begin(), text.end(), regex);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& match = *it;
    bool has_hit_group = match.size() > 1 && match[1].matched;
    size_t position = static_cast<size_t>(match.position(has_hit_group ? 1 : 0));
    // Report the start of the identifier the match falls in.
    while (position > 0 && is_identifier_char(text[position - 1]) &&
           is_identifier_char(text[position])) {
      --position;
    }
    hits.push_back({category, position, why});
  }
}

// True when a launch's stream argument (whitespace removed) is a null stream.
bool is_null_stream(const std::string& argument) {
  static const std::regex null_stream(
      R"re((?:\(cudaStream_t\)|(?:static|reinterpret)_cast<cudaStream_t>|cudaStream_t)?)re"
      R"re([({]?(?:0[uUlL]{0,3}|0[xX]0[uUlL]{0,3}|nullptr|NULL)?[)}]?)re");
  // Runs of zeros collapse (0000 is 0 too), so the bounded match below cannot be dodged.
  std::string collapsed;
  for (char c : argument) {
    if (c != '0' || collapsed.empty() || collapsed.back() != '0') collapsed.push_back(c);
  }
  return collapsed.size() <= 64 && std::regex_match(collapsed, null_stream);
}

// Finds `<<<...>>>` launches with fewer than four configuration arguments or a null stream.
// Launches do not nest, so each scan resumes where the last one stopped: linear time.
void find_default_stream_launches(const std::string& code, std::vector<Hit>& hits) {
  for (size_t start = code.find("<<<"); start != std::string::npos;
       start = code.find("<<<", start)) {
    int depth = 0;
    std::vector<std::string> arguments(1);
    size_t i = start + 3;
    for (; i < code.size() && depth >= 0; ++i) {
      char c = code[i];
      if (depth == 0 && (code.compare(i, 3, ">>>") == 0 || c == ';')) break;
      if (c == '(' || c == '[' || c == '{') ++depth;
      if (c == ')' || c == ']' || c == '}') --depth;
      if (depth == 0 && c == ',') {
        arguments.emplace_back();
      } else if (!is_space(c)) {
        arguments.back().push_back(c);
      }
    }
    size_t launch = start;
    start = i;
    if (depth != 0 || code.compare(i, 3, ">>>") != 0) continue;  // not a launch configuration
    if (arguments.size() < 4) {
      hits.push_back({PolicyCategory::default_stream_launch, launch,
                      "launch with fewer than 4 configuration arguments runs on the default "
                      "stream; write <<<grid, block, shared_bytes, stream>>> with "
                      "stream = args->stream"});
    } else if (is_null_stream(arguments[3])) {
      hits.push_back({PolicyCategory::default_stream_launch, launch,
                      "launch on the null stream; pass args->stream"});
    }
  }
}

}  // namespace

std::vector<PolicyViolation> check_source(const SourcePolicy& policy, std::string_view source,
                                          std::string_view backend) {
  const backends::Backend& table = backends::get_backend(backend);  // throws for an unknown one
  SourceLocator locator(source);
  if (static_cast<int64_t>(source.size()) > policy.max_source_bytes) {
    return {{PolicyCategory::source_size, 1, 1,
             "source is " + std::to_string(source.size()) + " bytes, over the " +
                 std::to_string(policy.max_source_bytes) + "-byte limit",
             locator.excerpt(0)}};
  }
  PreparedSource prepared = prepare_source(source);
  auto applies = [&](PolicyCategory category) {
    if (!table.screens(category)) return false;
    return policy.enabled.count(category) > 0;
  };
  std::vector<Hit> hits;
  for (const Rule& rule : builtin_rules()) {
    if (applies(rule.category)) find_all(rule.regex, prepared.text, rule.category, rule.why, hits);
  }
  if (applies(PolicyCategory::default_stream_launch)) {
    find_default_stream_launches(prepared.code, hits);
  }
  for (const std::string& pattern : policy.extra_forbidden) {
    std::regex regex = with_context("policy.forbid", [&] { return compile_task_pattern(pattern); });
    find_all(regex, prepared.text, PolicyCategory::task_pattern,
             "matches the task's forbidden pattern '" + pattern + "'", hits);
  }

  // Offsets in the original source order hits by line and column. Excerpts only for those kept:
  // a hit per character of one long line must not cost a scan of that line each.
  for (Hit& hit : hits) hit.position = prepared.origin[hit.position];
  std::stable_sort(hits.begin(), hits.end(),
                   [](const Hit& a, const Hit& b) { return a.position < b.position; });
  std::vector<PolicyViolation> violations;
  std::set<std::pair<int, PolicyCategory>> seen;  // `#include <fstream>` is reported once
  for (Hit& hit : hits) {
    if (violations.size() == kMaxReportedViolations) break;
    SourceLocation at = locator.locate(hit.position);
    if (!seen.insert({at.line, hit.category}).second) continue;
    violations.push_back(
        {hit.category, at.line, at.column, std::move(hit.why), locator.excerpt(hit.position)});
  }
  return violations;
}

std::string format_violations(const std::vector<PolicyViolation>& violations,
                              const std::string& source_name) {
  std::string out;
  for (const PolicyViolation& v : violations) {
    out += source_name + ":" + std::to_string(v.line) + ":" + std::to_string(v.column) + ": [" +
           to_string(v.category) + "] " + v.rule + ": " + v.excerpt + "\n";
  }
  return out;
}

}  // namespace kforge::evaluation
