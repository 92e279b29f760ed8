#include "evaluation/source_policy.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "common/error.h"
#include "support/backends.h"
#include "task/policy_table.h"

namespace kforge::evaluation {
namespace {

namespace fs = std::filesystem;
using C = PolicyCategory;

std::vector<PolicyViolation> check(const std::string& source, const std::string& backend = "cuda") {
  return check_source(SourcePolicy{}, source, backend);
}

// Parses `text` as a task file and reads its [policy] table.
SourcePolicy policy_from(const std::string& text) {
  toml::table root = toml::parse(text);
  return parse_source_policy(root.get_as<toml::table>("policy"), "task.toml");
}

// The message of the Error that parsing `text` throws, or "" if it does not throw.
std::string policy_error(const std::string& text) {
  try {
    policy_from(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// One snippet, placed on line 3 after two spaces; the violation must point at `needle`.
struct Case {
  const char* snippet;
  PolicyCategory category;
  const char* needle;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.snippet; }

class DetectsEachRule : public ::testing::TestWithParam<Case> {};

TEST_P(DetectsEachRule, AtTheRightLineAndColumn) {
  KFORGE_REQUIRE_BACKEND("cuda");  // the cases are screened as cuda sources
  const Case& c = GetParam();
  std::string snippet = c.snippet;
  std::string source = "#include <kforge/kernel.h>\n// a kernel\n  " + snippet + "\nint z;\n";
  std::vector<PolicyViolation> found = check(source);
  ASSERT_EQ(found.size(), 1u) << format_violations(found, "k.cu");
  EXPECT_EQ(to_string(found[0].category), to_string(c.category));
  EXPECT_EQ(found[0].line, 3);
  ASSERT_NE(snippet.find(c.needle), std::string::npos);
  EXPECT_EQ(found[0].column, 3 + static_cast<int>(snippet.find(c.needle)));
  EXPECT_EQ(found[0].excerpt, snippet);
  EXPECT_FALSE(found[0].rule.empty());
}

INSTANTIATE_TEST_SUITE_P(
    SourcePolicy, DetectsEachRule,
    ::testing::Values(
        Case{"#include <cublas_v2.h>", C::library_compute, "#"},
        Case{"cublasSgemm(handle, CUBLAS_OP_N);", C::library_compute, "cublasSgemm"},
        Case{"cublasLtMatmul(lt);", C::library_compute, "cublasLt"},
        Case{"cudnnConvolutionForward(h);", C::library_compute, "cudnn"},
        Case{"cufftExecC2C(plan);", C::library_compute, "cufft"},
        Case{"cusparseSpMV(h);", C::library_compute, "cusparse"},
        Case{"cutlass::gemm::device::Gemm<float> op;", C::library_compute, "cutlass"},
        Case{"using namespace cute;", C::library_compute, "namespace"},
        Case{"#include <cute/tensor.hpp>", C::library_compute, "#"},
        Case{"thrust::sort(thrust::device, p, p + n);", C::library_compute, "thrust"},
        Case{"cub::DeviceReduce::Sum(t, b, in, out, n, stream);", C::library_compute, "cub"},
        Case{"at::Tensor t = at::matmul(a, b);", C::library_compute, "at::"},
        Case{"torch::matmul(a, b);", C::library_compute, "torch"},
        Case{"cblas_sgemm(CblasRowMajor);", C::library_compute, "cblas_sgemm"},
        Case{"sgemm_(&ta, &tb);", C::library_compute, "sgemm_"},
        Case{"dgemm_(&ta, &tb);", C::library_compute, "dgemm_"},
        Case{"Eigen::MatrixXf m;", C::library_compute, "Eigen"},
        Case{"mkl_free(p);", C::library_compute, "mkl_free"},
        Case{"dnnl::engine engine;", C::library_compute, "dnnl"},
        Case{"std::thread worker(run);", C::thread_creation, "std"},
        Case{"std::jthread worker(run);", C::thread_creation, "std"},
        Case{"auto f = std::async(std::launch::async, run);", C::thread_creation, "std::async"},
        Case{"pthread_create(&t, nullptr, run, nullptr);", C::thread_creation, "pthread_create"},
        Case{"pid_t p = fork();", C::thread_creation, "fork"},
        Case{"vfork();", C::thread_creation, "vfork"},
        Case{"clone(fn, stack, 0, nullptr);", C::thread_creation, "clone"},
        Case{"posix_spawn(&pid, path, nullptr, nullptr, argv, envp);", C::thread_creation,
             "posix_spawn"},
        Case{"#include <thread>", C::thread_creation, "#"},
        Case{"#include <future>", C::thread_creation, "#"},
        Case{"#include <pthread.h>", C::thread_creation, "#"},
        Case{"std::for_each(std::execution::par, a, b, f);", C::thread_creation, "std::execution"},
        Case{"cudaStreamCreate(&s);", C::stream_creation, "cudaStreamCreate"},
        Case{"cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);", C::stream_creation,
             "cudaStreamCreate"},
        Case{"cuStreamCreate(&s, 0);", C::stream_creation, "cuStreamCreate"},
        Case{"k<<<g, b, 0, cudaStreamPerThread>>>(x);", C::stream_creation, "cudaStream"},
        Case{"k<<<g, b, 0, cudaStreamLegacy>>>(x);", C::stream_creation, "cudaStream"},
        Case{"cudaGraphLaunch(exec, stream);", C::stream_creation, "cudaGraphLaunch"},
        Case{"cudaGraphInstantiate(&exec, graph, 0);", C::stream_creation, "cudaGraph"},
        Case{"cudaLaunchHostFunc(stream, fn, nullptr);", C::stream_creation, "cuda"},
        Case{"cudaStreamAddCallback(stream, cb, nullptr, 0);", C::stream_creation, "cuda"},
        Case{"cudaEventCreate(&e);", C::stream_creation, "cudaEventCreate"},
        Case{"cudaEventRecord(e, stream);", C::stream_creation, "cudaEventRecord"},
        Case{"kernel<<<grid, block>>>(x);", C::default_stream_launch, "<<<"},
        Case{"kernel<<<grid, block, smem>>>(x);", C::default_stream_launch, "<<<"},
        Case{"kernel<<<grid, block, 0, 0>>>(x);", C::default_stream_launch, "<<<"},
        Case{"kernel<<<grid, block, 0, nullptr>>>(x);", C::default_stream_launch, "<<<"},
        Case{"kernel<<<grid, block, 0, (cudaStream_t)0>>>(x);", C::default_stream_launch, "<<<"},
        Case{"cudaMemcpy(d, h, n, cudaMemcpyHostToDevice);", C::default_stream_launch, "cuda"},
        Case{"cudaMemset(d, 0, n);", C::default_stream_launch, "cudaMemset"},
        Case{"cudaMemcpy2D(d, p, s, p, w, h, kind);", C::default_stream_launch, "cudaMemcpy2D"},
        Case{"cudaMemcpyToSymbol(c, h, n);", C::default_stream_launch, "cudaMemcpyToSymbol"},
        Case{"cudaDeviceSynchronize();", C::default_stream_launch, "cudaDeviceSynchronize"},
        Case{"attr.accessPolicyWindow.base_ptr = p;", C::l2_persistence, "accessPolicyWindow"},
        Case{"cudaAccessPolicyWindow w{};", C::l2_persistence, "cudaAccessPolicyWindow"},
        Case{"cudaStreamSetAttribute(s, key, &attr);", C::l2_persistence, "cudaStreamSet"},
        Case{"cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, n);", C::l2_persistence,
             "cudaDeviceSetLimit"},
        Case{"cudaCtxResetPersistingL2Cache();", C::l2_persistence, "cuda"},
        Case{"w.hitRatio = 1.0f;", C::l2_persistence, "hitRatio"},
        Case{"w.missProp = p;", C::l2_persistence, "missProp"},
        Case{R"(asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));)",
             C::l2_persistence, "createpolicy"},
        Case{R"(FILE* f = fopen("out.txt", "w");)", C::file_and_environment, "fopen"},
        Case{R"(freopen("x", "w", stdout);)", C::file_and_environment, "freopen"},
        Case{R"(int fd = open("x", O_RDONLY);)", C::file_and_environment, "open"},
        Case{"int fd = ::openat(AT_FDCWD, name, 0);", C::file_and_environment, "openat"},
        Case{"int fd = creat(name, 0644);", C::file_and_environment, "creat"},
        Case{"std::ifstream in(name);", C::file_and_environment, "ifstream"},
        Case{"std::ofstream out(name);", C::file_and_environment, "ofstream"},
        Case{"#include <fstream>", C::file_and_environment, "#"},
        Case{R"(const char* home = getenv("HOME");)", C::file_and_environment, "getenv"},
        Case{R"(const char* v = secure_getenv("X");)", C::file_and_environment, "secure"},
        Case{"extern char** environ;", C::file_and_environment, "environ"},
        Case{R"(setenv("A", "1", 1);)", C::file_and_environment, "setenv"},
        Case{"putenv(text);", C::file_and_environment, "putenv"},
        Case{R"(const char* p = "/proc/self/maps";)", C::file_and_environment, "/proc/"},
        Case{R"(const char* d = "/dev/shm/x";)", C::file_and_environment, "/dev/"},
        Case{"readlink(p, buf, n);", C::file_and_environment, "readlink"},
        Case{R"(void* h = dlopen("libcublas.so", RTLD_NOW);)", C::file_and_environment, "dlopen"},
        Case{R"(auto fn = dlsym(h, "f");)", C::file_and_environment, "dlsym"},
        Case{R"(system("ls");)", C::file_and_environment, "system"},
        Case{R"(std::system("ls");)", C::file_and_environment, "system"},
        Case{R"(FILE* p = popen("ls", "r");)", C::file_and_environment, "popen"},
        Case{"execve(path, argv, envp);", C::file_and_environment, "execve"},
        Case{"execvp(file, argv);", C::file_and_environment, "execvp"},
        Case{"int s = socket(AF_INET, SOCK_STREAM, 0);", C::file_and_environment, "socket"},
        Case{"connect(s, addr, len);", C::file_and_environment, "connect"},
        Case{"write(2, text, n);", C::file_and_environment, "write"},
        Case{"write(STDOUT_FILENO, text, n);", C::file_and_environment, "write"},
        Case{"dup2(fd, 1);", C::file_and_environment, "dup2"},
        Case{"exit(1);", C::process_control, "exit"},
        Case{"std::exit(1);", C::process_control, "exit"},
        Case{"_exit(0);", C::process_control, "_exit"},
        Case{"quick_exit(0);", C::process_control, "quick_exit"},
        Case{"abort();", C::process_control, "abort"},
        Case{"if (bad) std::abort();", C::process_control, "abort"},
        Case{"signal(SIGSEGV, handler);", C::process_control, "signal"},
        Case{"sigaction(SIGSEGV, &sa, nullptr);", C::process_control, "sigaction"},
        Case{"if (setjmp(env)) return 0;", C::process_control, "setjmp"},
        Case{"longjmp(env, 1);", C::process_control, "longjmp"},
        Case{"atexit(cleanup);", C::process_control, "atexit"},
        Case{"ptrace(PTRACE_TRACEME, 0, 0, 0);", C::process_control, "ptrace"},
        Case{R"(prctl(PR_SET_NAME, "x");)", C::process_control, "prctl"},
        Case{"setrlimit(RLIMIT_AS, &r);", C::process_control, "setrlimit"},
        Case{"kill(pid, SIGKILL);", C::process_control, "kill"},
        Case{R"(syscall(SYS_write, 1, "x", 1);)", C::process_control, "syscall"},
        Case{"cudaDeviceReset();", C::process_control, "cudaDeviceReset"}));

class AllowsHonestCode : public ::testing::TestWithParam<const char*> {};

TEST_P(AllowsHonestCode, WithoutViolations) {
  KFORGE_REQUIRE_BACKEND("cuda");  // the cases are screened as cuda sources
  std::string source = std::string("int f() {\n") + GetParam() + "\n}\n";
  EXPECT_EQ(format_violations(check(source), "k.cu"), "");
}

INSTANTIATE_TEST_SUITE_P(
    SourcePolicy, AllowsHonestCode,
    ::testing::Values(
        "#pragma omp parallel for schedule(static)", "#pragma omp simd reduction(+ : s)",
        "#include <omp.h>", "#include <cuda_runtime.h>", "#include <cooperative_groups.h>",
        "namespace cg = cooperative_groups;", "kernel<<<grid, block, 0, stream>>>(x);",
        "kernel<<<dim3(gx, gy), dim3(32, 8), smem, args->stream>>>(x);",
        "kernel<<<std::min<int64_t>(rows, 65535), 256, 0, stream>>>(x);",
        "kernel<<<grid, block, 0, s>>>(x);",
        "cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, stream);",
        "cudaMemsetAsync(d, 0, n, stream);", "cudaMemcpy2DAsync(d, p, s, p, w, h, k, stream);",
        "cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);",
        "cudaStreamSynchronize(stream);", "cudaGetDevice(&d);",
        "typedef cub::BlockReduce<float, 256> BlockReduce;",
        "using WarpReduce = cub::WarpReduce<float>;", "file.open(name); p->exit(); t.abort();",
        "int exit_code = 0, open_files = 0, signal_level = 1, at_least = 2;", "float at = v.at(3);",
        "const int64_t big = 1'000'000;", "float dev = 2.0f; float y = x / dev;",
        R"(const char* s = "thread";)", "__syncthreads();",
        R"(asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));)",
        "read_row(x, i); write_row(y, i, v);", "float hit = ratio; int dup_count = 0;",
        "std::this_thread::get_id();"));

TEST(SourcePolicy, IgnoresComments) {
  KFORGE_REQUIRE_BACKEND("cuda");
  std::string source =
      "// std::thread t(run);\n"
      "/* fork(); cudaStreamCreate(&s);\n"
      "   exit(1); */ int x = 0;  // getenv(\"HOME\")\n"
      "// a comment continued \\\n"
      "std::thread t(run);\n";
  EXPECT_EQ(format_violations(check(source), "k.cu"), "");
}

TEST(SourcePolicy, KeepsStringsAndCodeAfterThem) {
  KFORGE_REQUIRE_BACKEND("cuda");
  // A naive stripper would take the "//" inside the string for a comment.
  std::string source = "const char* url = \"http://x\"; std::thread t(run);\n";
  std::vector<PolicyViolation> found = check(source);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].category, C::thread_creation);
  EXPECT_EQ(found[0].column, 31);
}

TEST(SourcePolicy, SeesThroughSplicesSpacesAndCommentTricks) {
  KFORGE_REQUIRE_BACKEND("cuda");
  auto first = [](const std::string& source) {
    std::vector<PolicyViolation> found = check(source);
    return found.empty() ? std::string("none")
                         : to_string(found[0].category) + "@" + std::to_string(found[0].line) +
                               ":" + std::to_string(found[0].column);
  };
  EXPECT_EQ(first("int a;\n  std::thr\\\nead t(run);\n"), "thread_creation@2:3");
  EXPECT_EQ(first("int a;\n  std::thr\\  \nead t(run);\n"), "thread_creation@2:3");
  EXPECT_EQ(first("std ::\n   thread t(run);\n"), "thread_creation@1:1");
  EXPECT_EQ(first("std/* */::thread t(run);\n"), "thread_creation@1:1");
  // The compiler reads 0 and the literal '/*', so the call is real code.
  EXPECT_EQ(first("IGNORE(0'/*') std::thread t(run); // */\n"), "thread_creation@1:15");
  EXPECT_EQ(first("kernel<<<dim3(a, b),\n    256>>>(x);\n"), "default_stream_launch@1:7");
  EXPECT_EQ(first("%:include <thread>\n"), "thread_creation@1:1");
}

TEST(SourcePolicy, DefaultStreamLaunchesOnlyMatterOnCuda) {
  KFORGE_REQUIRE_BACKEND("cuda");
  std::string source = "void f() {\n  kernel<<<grid, block>>>(x);\n  cudaDeviceSynchronize();\n}\n";
  EXPECT_TRUE(check(source, "cpu").empty());
  std::vector<PolicyViolation> found = check(source, "cuda");
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].line, 2);
  EXPECT_EQ(found[0].column, 9);
  EXPECT_EQ(found[1].line, 3);
  EXPECT_THROW(check(source, "metal"), Error);
}

TEST(SourcePolicy, ReportsOncePerLineAndCategoryInOrder) {
  std::string source = "#include <fstream>\nint g() { exit(1); fork(); return fork(); }\n";
  std::vector<PolicyViolation> found = check(source, "cpu");
  ASSERT_EQ(found.size(), 3u) << format_violations(found, "k.cpp");
  EXPECT_EQ(found[0].category, C::file_and_environment);
  EXPECT_EQ(found[0].column, 1);
  EXPECT_EQ(found[1].category, C::process_control);
  EXPECT_EQ(found[1].column, 11);
  EXPECT_EQ(found[2].category, C::thread_creation);
  EXPECT_EQ(found[2].column, 20);
}

TEST(SourcePolicy, CapsTheNumberOfReports) {
  std::string source;
  for (int i = 0; i < 150; ++i) source += "fork();\n";
  std::vector<PolicyViolation> found = check(source, "cpu");
  ASSERT_EQ(found.size(), kMaxReportedViolations);
  EXPECT_EQ(found.back().line, static_cast<int>(kMaxReportedViolations));
}

TEST(SourcePolicy, AllowSwitchesACategoryOff) {
  KFORGE_REQUIRE_BACKEND("cuda");
  SourcePolicy policy =
      policy_from("[policy]\nallow = [\"library_compute\", \"thread_creation\"]\n");
  EXPECT_EQ(policy.enabled.count(C::library_compute), 0u);
  EXPECT_EQ(policy.enabled.count(C::thread_creation), 0u);
  EXPECT_EQ(policy.enabled.size(), switchable_policy_categories().size() - 2);
  std::string source = "cublasSgemm(h);\nstd::thread t(run);\ncudaStreamCreate(&s);\n";
  std::vector<PolicyViolation> found = check_source(policy, source, "cuda");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].category, C::stream_creation);
  EXPECT_EQ(check(source).size(), 3u);
}

TEST(SourcePolicy, ExtraForbiddenPatternsApply) {
  KFORGE_REQUIRE_BACKEND("cuda");
  SourcePolicy policy = policy_from("[policy]\nforbid = ['\\bgemv_reference\\b', 'sum_{1,3}x']\n");
  ASSERT_EQ(policy.extra_forbidden.size(), 2u);
  std::string source = "int a;\n  gemv_reference<<<g, b, 0, s>>>(x);\nint sum_x, sum__x;\n";
  std::vector<PolicyViolation> found = check_source(policy, source, "cuda");
  ASSERT_EQ(found.size(), 2u) << format_violations(found, "k.cu");
  EXPECT_EQ(found[0].category, C::task_pattern);
  EXPECT_EQ(found[0].line, 2);
  EXPECT_EQ(found[0].column, 3);
  EXPECT_NE(found[0].rule.find("gemv_reference"), std::string::npos);
  EXPECT_EQ(found[1].line, 3);
  EXPECT_EQ(found[1].column, 5);
  EXPECT_TRUE(check(source).empty());
}

TEST(SourcePolicy, ParsesDefaultsAndLimits) {
  SourcePolicy defaults = parse_source_policy(nullptr, "task.toml");
  EXPECT_EQ(defaults.enabled.size(), 7u);
  EXPECT_TRUE(defaults.extra_forbidden.empty());
  EXPECT_EQ(defaults.max_source_bytes, 262144);
  EXPECT_EQ(policy_from("name = 'x'\n").enabled.size(), 7u);
  EXPECT_EQ(policy_from("[policy]\nmax_source_bytes = 1000\n").max_source_bytes, 1000);
}

TEST(SourcePolicy, BadPolicyTablesNameTheField) {
  auto expect_error = [](const std::string& text, const std::string& field,
                         const std::string& what) {
    std::string message = policy_error("[policy]\n" + text + "\n");
    EXPECT_NE(message.find("task.toml: policy." + field + ": "), std::string::npos)
        << text << " -> " << message;
    EXPECT_NE(message.find(what), std::string::npos) << text << " -> " << message;
  };
  expect_error("forbid = ['(']", "forbid[0]", "not a valid ECMAScript regex");
  expect_error("forbid = ['ok', 'a.*b']", "forbid[1]", "repeats without bound");
  expect_error("forbid = ['a+']", "forbid[0]", "repeats without bound");
  expect_error("forbid = ['a{2,}']", "forbid[0]", "repeats without bound");
  expect_error("forbid = ['x{0,3}']", "forbid[0]", "matches the empty string");
  expect_error("forbid = 'x'", "forbid", "expected an array of strings");
  expect_error("allowed = ['library_compute']", "allowed", "unknown key");
  expect_error("allow = 'library_compute'", "allow", "expected an array of strings");
  expect_error("allow = [1]", "allow[0]", "expected a string");
  expect_error("allow = ['threads']", "allow[0]", "unknown policy category 'threads'");
  expect_error("allow = ['source_size']", "allow[0]", "cannot be allowed");
  expect_error("max_source_bytes = 0", "max_source_bytes", "positive integer");
  expect_error("max_source_bytes = 'big'", "max_source_bytes", "positive integer");
  expect_error("max_source_bytes = 1.5", "max_source_bytes", "positive integer");
  EXPECT_EQ(policy_error("[policy]\nforbid = ['[*+]x{1,2}']\n"), "");
}

TEST(SourcePolicy, OversizeSourceGivesOneViolation) {
  KFORGE_REQUIRE_BACKEND("cuda");
  SourcePolicy policy;
  policy.max_source_bytes = 100;
  std::string honest(100, ' ');
  EXPECT_TRUE(check_source(policy, honest, "cuda").empty());
  std::string big = "fork(); exit(1);\n" + std::string(100, ' ');
  std::vector<PolicyViolation> found = check_source(policy, big, "cuda");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].category, C::source_size);
  EXPECT_EQ(found[0].line, 1);
  EXPECT_EQ(found[0].column, 1);
  EXPECT_NE(found[0].rule.find("117 bytes"), std::string::npos) << found[0].rule;
}

TEST(SourcePolicy, SurvivesHostileSourcesOfTheMaximumSize) {
  KFORGE_REQUIRE_BACKEND("cuda");
  std::string source = "std" + std::string(100000, ' ') + "::thread t;\n" +
                       std::string(100000, 'a') + "\nk<<<g, b, 0, " + std::string(50000, '0') +
                       ">>>(x);\n";
  ASSERT_LE(source.size(), 262144u);
  std::vector<PolicyViolation> found = check(source);
  ASSERT_EQ(found.size(), 2u) << format_violations(found, "k.cu");
  EXPECT_EQ(found[0].category, C::thread_creation);
  EXPECT_LE(found[0].excerpt.size(), 106u);
  EXPECT_EQ(found[1].category, C::default_stream_launch);
  EXPECT_EQ(found[1].line, 3);
}

TEST(SourcePolicy, RepeatedConstructsOnOneLongLineCostLinearTime) {
  KFORGE_REQUIRE_BACKEND("cuda");
  std::string source;
  for (int i = 0; i < 15000; ++i) source += "k<<<";
  for (int i = 0; i < 15000; ++i) source += "fork();";
  std::vector<PolicyViolation> found = check(source);
  ASSERT_EQ(found.size(), 1u) << format_violations(found, "k.cu");
  EXPECT_EQ(found[0].category, C::thread_creation);
  EXPECT_EQ(found[0].column, 60001);
}

TEST(SourcePolicy, FormatsOneLinePerViolation) {
  std::vector<PolicyViolation> found = {
      {C::stream_creation, 3, 5, "creates a stream", "cudaStreamCreate(&s);"},
      {C::process_control, 9, 1, "exits", "exit(1);"}};
  EXPECT_EQ(format_violations(found, "k.cu"),
            "k.cu:3:5: [stream_creation] creates a stream: cudaStreamCreate(&s);\n"
            "k.cu:9:1: [process_control] exits: exit(1);\n");
  EXPECT_EQ(format_violations({}, "k.cu"), "");
}

TEST(SourcePolicy, CategoryNamesRoundTrip) {
  const std::vector<std::string> names = {
      "library_compute",       "thread_creation", "stream_creation",
      "default_stream_launch", "l2_persistence",  "file_and_environment",
      "process_control",       "source_size",     "task_pattern"};
  for (size_t i = 0; i < names.size(); ++i) {
    PolicyCategory category = parse_policy_category(names[i]);
    EXPECT_EQ(static_cast<size_t>(category), i);
    EXPECT_EQ(to_string(category), names[i]);
  }
  EXPECT_THROW(parse_policy_category("thread"), Error);
}

fs::path repository_root() {
#ifdef KFORGE_SOURCE_DIR
  return fs::path(KFORGE_SOURCE_DIR);
#else
  for (fs::path dir = fs::current_path(); !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / "include/kforge/kernel.h")) return dir;
    if (dir == dir.parent_path()) break;
  }
  return {};
#endif
}

TEST(SourcePolicy, RealKernelsAndReferencesPass) {
  fs::path root = repository_root();
  ASSERT_TRUE(fs::exists(root / "include/kforge/kernel.h")) << root;
  int checked = 0;
  for (const char* dir : {"kernels/cpu", "kernels/cuda", "examples"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      fs::path path = entry.path();
      bool is_kernel = path.extension() == ".cpp" || path.extension() == ".cu";
      if (!entry.is_regular_file() || !is_kernel) continue;
      if (std::string(dir) == "examples" && path.stem() != "reference") continue;
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      std::string backend = path.extension() == ".cu" ? "cuda" : "cpu";
      if (!testing::has_backend(backend)) continue;  // a build without the cuda backend
      EXPECT_EQ(format_violations(check(text.str(), backend), path.string()), "");
      ++checked;
    }
  }
  EXPECT_GE(checked, testing::has_backend("cuda") ? 24 : 10);
}

}  // namespace
}  // namespace kforge::evaluation
