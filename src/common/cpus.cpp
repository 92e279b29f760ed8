#include "common/cpus.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <thread>

#include "common/error.h"

namespace kforge {
namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

/// The leading whole number of `text` if it is >= 1 (Slurm's "4(x2),2" reads as 4).
std::optional<int> leading_count(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && digits < 9 && std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  if (digits == 0) return std::nullopt;
  const int count = std::stoi(text.substr(0, digits));
  return count >= 1 ? std::optional<int>(count) : std::nullopt;
}

int affinity_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
    const int count = CPU_COUNT(&mask);
    if (count >= 1) return count;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

std::optional<int> slurm_cpus(const std::optional<std::string>& job_id,
                              const std::optional<std::string>& cpus_per_task,
                              const std::optional<std::string>& job_cpus_per_node) {
  if (!job_id || job_id->empty()) return std::nullopt;
  if (cpus_per_task) {
    if (std::optional<int> count = leading_count(*cpus_per_task)) return count;
  }
  if (job_cpus_per_node) return leading_count(*job_cpus_per_node);
  return std::nullopt;
}

int usable_cpus() {
  int cpus = affinity_cpus();
  if (const std::optional<std::string> text = env("KFORGE_CPUS")) {
    const std::optional<int> count = leading_count(*text);
    if (!count || std::to_string(*count) != *text) {
      throw Error("KFORGE_CPUS: expected a whole number of CPUs >= 1, got '" + *text + "'");
    }
    cpus = std::min(cpus, *count);
  }
  if (const std::optional<int> slurm = slurm_cpus(env("SLURM_JOB_ID"), env("SLURM_CPUS_PER_TASK"),
                                                  env("SLURM_JOB_CPUS_PER_NODE"))) {
    cpus = std::min(cpus, *slurm);
  }
  return std::max(1, cpus);
}

}  // namespace kforge
