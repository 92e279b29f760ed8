#include "support/processes.h"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "common/files.h"

namespace kforge::testing {
namespace fs = std::filesystem;

bool alive(int pid) {
  if (::kill(pid, 0) != 0) return false;
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  return stat.substr(stat.rfind(')') + 2, 1) != "Z";
}

bool gone_within(int pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (alive(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::vector<int> processes_with(const std::string& a, const std::string& b) {
  std::vector<int> found;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream file(entry.path() / "cmdline", std::ios::binary);
    const std::string command((std::istreambuf_iterator<char>(file)),
                              std::istreambuf_iterator<char>());
    if (command.find(a) != std::string::npos && command.find(b) != std::string::npos) {
      found.push_back(std::stoi(name));
    }
  }
  return found;
}

}  // namespace kforge::testing
