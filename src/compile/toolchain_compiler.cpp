#include "compile/toolchain_compiler.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "common/error.h"
#include "common/files.h"
#include "common/hash.h"
#include "process/subprocess.h"
#include "worker/candidate_router.h"

namespace kforge::compile {
namespace fs = std::filesystem;

namespace {

// First line of `program --version` (g++) or its last "release" line (nvcc).
std::string query_version(const std::string& program, const std::string& label) {
  process::CommandResult result = process::run_command({program, "--version"}, 30.0);
  if (result.exit_code != 0) {
    throw Error("'" + program + " --version' failed (exit " + std::to_string(result.exit_code) +
                "): " + result.output);
  }
  std::istringstream lines(result.output);
  std::string line;
  std::string chosen;
  while (std::getline(lines, line)) {
    if (chosen.empty() && !line.empty()) chosen = line;
    if (line.find("Build cuda") != std::string::npos || line.find(", V") != std::string::npos) {
      auto v = line.find(", V");
      if (v != std::string::npos) return label + " " + line.substr(v + 3);
    }
  }
  auto last_space = chosen.rfind(' ');
  return label + " " + (last_space == std::string::npos ? chosen : chosen.substr(last_space + 1));
}

// The folders of include dir `dir` whose files the artifact key covers: kforge/ (the ABI),
// common/ and every <name>/common/ (the kernel libraries under kernels/: common, cpu/common,
// cuda/common). Costs one listing of `dir`; a system include dir normally has none of them.
std::vector<fs::path> hashed_folders(const fs::path& dir) {
  std::vector<fs::path> folders;
  std::error_code error;
  for (const fs::path& folder : {dir / "kforge", dir / "common"}) {
    if (fs::is_directory(folder, error)) folders.push_back(folder);
  }
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    std::error_code inner;
    if (entry.is_directory(inner) && fs::is_directory(entry.path() / "common", inner)) {
      folders.push_back(entry.path() / "common");
    }
  }
  return folders;
}

}  // namespace

ToolchainCompiler::ToolchainCompiler(ToolchainOptions options, ToolchainLookup toolchains)
    : options_(std::move(options)), toolchains_(std::move(toolchains)) {
  if (const char* cxx = std::getenv("KFORGE_CXX"); cxx != nullptr && *cxx != '\0') {
    options_.gxx = cxx;
  }
  fs::create_directories(options_.cache_dir);
}

std::string ToolchainCompiler::compiler_path(const std::string& backend) {
  const Toolchain& chain = toolchains_(backend);
  std::lock_guard lock(mutex_);
  auto found = paths_.find(backend);
  if (found == paths_.end()) found = paths_.emplace(backend, chain.locate(options_)).first;
  return found->second;
}

std::string ToolchainCompiler::toolchain(const std::string& backend) {
  std::string program = compiler_path(backend);
  const std::string label = toolchains_(backend).label();
  std::lock_guard lock(mutex_);
  auto found = versions_.find(backend);
  if (found == versions_.end()) {
    found = versions_.emplace(backend, query_version(program, label)).first;
  }
  return found->second;
}

std::vector<std::string> ToolchainCompiler::command(const CompileJob& job,
                                                    const std::string& source_path,
                                                    const std::string& output) {
  std::vector<std::string> argv = {compiler_path(job.backend)};
  ToolchainOptions options = options_;
  if (!job.cuda_arch.empty()) options.cuda_arch = job.cuda_arch;
  for (std::string& flag : toolchains_(job.backend).flags(options)) argv.push_back(std::move(flag));
  for (const std::string& dir : options_.include_dirs) argv.push_back("-I" + dir);
  for (const auto& [key, value] : job.defines) argv.push_back("-D" + key + "=" + value);
  argv.push_back(source_path);
  argv.push_back("-o");
  argv.push_back(output);
  return argv;
}

std::string ToolchainCompiler::headers_digest() {
  std::lock_guard lock(mutex_);
  if (!headers_digest_.empty()) return headers_digest_;
  std::string contents;
  for (const std::string& dir : options_.include_dirs) {
    std::vector<fs::path> files;
    for (const fs::path& folder : hashed_folders(dir)) {
      for (const auto& entry : fs::recursive_directory_iterator(folder)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      contents += fs::relative(file, dir).string() + '\n' + read_file(file.string()) + '\n';
    }
  }
  headers_digest_ = sha256_hex(contents);
  return headers_digest_;
}

Artifact ToolchainCompiler::stage_python(const CompileJob& job) {
  Artifact artifact;
  artifact.key = sha256_hex("python\n" + job.source).substr(0, 24);
  fs::path source = fs::path(options_.cache_dir) / artifact.key;
  source += ".py";
  artifact.path = source.string();
  artifact.from_cache = fs::exists(source);
  if (!artifact.from_cache) write_file_atomically(source, job.source);
  artifact.log = "staged for the Python candidate worker: importing it there is its build";
  return artifact;
}

Artifact ToolchainCompiler::compile(const CompileJob& job) {
  if (worker::is_python_candidate(job.source_name)) return stage_python(job);
  Artifact artifact;
  const std::string extension = toolchains_(job.backend).source_extension();
  // The key covers everything that changes the binary: source, defines, flags, toolchain, and
  // the kforge headers a source may include.
  std::ostringstream identity;
  identity << job.backend << '\n' << toolchain(job.backend) << '\n' << options_.cuda_arch << '\n';
  identity << headers_digest() << '\n';
  for (const std::string& arg : command(job, "SRC", "OUT")) identity << arg << ' ';
  identity << '\n' << job.source;
  artifact.key = sha256_hex(identity.str()).substr(0, 24);

  fs::path base = fs::path(options_.cache_dir) / artifact.key;
  fs::path library = base;
  library += ".so";
  fs::path log = base;
  log += ".log";
  fs::path failed = base;
  failed += ".failed";
  if (fs::exists(library)) {
    artifact.path = library.string();
    artifact.log = read_file(log);
    artifact.from_cache = true;
    return artifact;
  }
  if (fs::exists(failed)) {  // failed builds are typed results too: never retried blindly
    artifact.verdict = Verdict::compile_error;
    artifact.log = read_file(failed);
    artifact.from_cache = true;
    return artifact;
  }

  fs::path source = base;
  source += extension;
  write_file_atomically(source, job.source);
  fs::path staging = base;
  staging += ".so.tmp" + std::to_string(::getpid()) + "_" +
             std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000);
  process::CommandResult result =
      process::run_command(command(job, source.string(), staging.string()), options_.timeout_s);
  artifact.compile_s = result.duration_s;
  artifact.log = result.output;
  if (result.timed_out) {
    artifact.log += "\n[kforge] compiler killed after " + std::to_string(options_.timeout_s) + " s";
  }
  if (result.exit_code != 0 || result.timed_out || !fs::exists(staging)) {
    artifact.verdict = Verdict::compile_error;
    std::error_code ignored;
    fs::remove(staging, ignored);
    if (!result.timed_out) write_file_atomically(failed, artifact.log);
    return artifact;
  }
  write_file_atomically(log, artifact.log);
  fs::rename(staging, library);
  artifact.path = library.string();
  return artifact;
}

}  // namespace kforge::compile
