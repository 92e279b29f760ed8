// What one full-size check's scratch file costs the operating system, apart from kforge: the
// steps a candidate's outputs take through a file today (issue 21; bench/ladder/README.md).
// The candidate worker creates the file (posix_fallocate, as common/mapped_file.cpp reserves
// it), writes the outputs through a shared mapping and unmaps it; the orchestrator maps it,
// reads every page while comparing, unmaps it and removes it.
//
//   kforge_bench_scratch_probe [--dir /dev/shm] [--bytes N] [--repeats 3] [--json]
//
// --bytes defaults to relu_kernelbench's output (4096 x 393216 fp32, 6.44 GB). Prints one line a
// repeat (seconds per step), or with --json one object with every repeat.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error(fmt::format("{} {}: {}", what, path, std::strerror(errno)));
}

/// Seconds of each step for one file of `bytes` at `path` (removed at the end).
nlohmann::json one_repeat(const std::string& path, size_t bytes) {
  nlohmann::json steps;
  auto start = std::chrono::steady_clock::now();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) fail("cannot create", path);
  if (const int error = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); error != 0) {
    errno = error;
    ::close(fd);
    ::unlink(path.c_str());
    fail("posix_fallocate (no space?)", path);
  }
  steps["fallocate_s"] = seconds_since(start);

  start = std::chrono::steady_clock::now();
  void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED) fail("cannot map", path);
  std::memset(mapped, 1, bytes);  // every page faulted in and written, as a read-back does
  steps["write_through_s"] = seconds_since(start);
  start = std::chrono::steady_clock::now();
  ::munmap(mapped, bytes);
  steps["writer_munmap_s"] = seconds_since(start);

  start = std::chrono::steady_clock::now();
  fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open", path);
  mapped = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED) fail("cannot map", path);
  const auto* bytes_read = static_cast<const volatile unsigned char*>(mapped);
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes; i += 4096) sum += bytes_read[i];  // a fault per page
  steps["map_and_touch_s"] = seconds_since(start);
  start = std::chrono::steady_clock::now();
  ::munmap(mapped, bytes);
  steps["reader_munmap_s"] = seconds_since(start);

  start = std::chrono::steady_clock::now();
  if (::unlink(path.c_str()) != 0) fail("cannot remove", path);
  steps["unlink_s"] = seconds_since(start);
  if (sum != bytes / 4096 + (bytes % 4096 ? 1 : 0)) throw std::runtime_error("pages read back wrong");
  return steps;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The OS cost of a full-size check's scratch file (create, write, map, remove)"};
  std::string dir = "/dev/shm";
  uint64_t bytes = uint64_t{4096} * 393216 * 4;
  int repeats = 3;
  bool json = false;
  app.add_option("--dir", dir, "folder the file goes in")->check(CLI::ExistingDirectory)
      ->capture_default_str();
  app.add_option("--bytes", bytes, "file size in bytes")->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--repeats", repeats, "files made one after another")->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);
  const std::string path = dir + "/kforge-scratch-probe-" + std::to_string(::getpid()) + ".bin";
  try {
    nlohmann::json report = {{"dir", dir}, {"bytes", bytes}, {"repeats", nlohmann::json::array()}};
    for (int r = 0; r < repeats; ++r) {
      nlohmann::json steps = one_repeat(path, bytes);
      if (!json) {
        std::cout << fmt::format(
            "{} {:.2f} GB, repeat {}: fallocate {:.3f} s, write-through {:.3f} s, munmap {:.3f} s, "
            "map+touch {:.3f} s, munmap {:.3f} s, unlink {:.3f} s\n",
            dir, bytes / 1e9, r, steps["fallocate_s"].get<double>(),
            steps["write_through_s"].get<double>(), steps["writer_munmap_s"].get<double>(),
            steps["map_and_touch_s"].get<double>(), steps["reader_munmap_s"].get<double>(),
            steps["unlink_s"].get<double>());
      }
      report["repeats"].push_back(std::move(steps));
    }
    if (json) std::cout << report.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "kforge_bench_scratch_probe: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
