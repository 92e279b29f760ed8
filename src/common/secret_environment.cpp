#include "common/secret_environment.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

extern char** environ;

namespace kforge {
namespace {

std::mutex& withdrawn_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<std::string, std::string>& withdrawn() {
  static std::map<std::string, std::string> values;
  return values;
}

/// [env_start, env_end) of this process (fields 50 and 51 of /proc/self/stat); false when
/// unreadable.
bool initial_environment_block(char** begin, char** end) {
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) is in parentheses and may hold spaces: count after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  uintptr_t start = 0, stop = 0;
  for (int number = 3; number <= 51 && fields >> field; ++number) {
    if (number == 50) start = std::strtoull(field.c_str(), nullptr, 10);
    if (number == 51) stop = std::strtoull(field.c_str(), nullptr, 10);
  }
  if (start == 0 || stop <= start) return false;
  *begin = reinterpret_cast<char*>(start);
  *end = reinterpret_cast<char*>(stop);
  return true;
}

/// NUL-fills every "NAME=..." entry of the initial environment block.
void erase_from_initial_block(const std::string& name) {
  char* begin = nullptr;
  char* end = nullptr;
  if (!initial_environment_block(&begin, &end)) return;
  const std::string prefix = name + "=";
  for (char* entry = begin; entry < end;) {
    const size_t length = strnlen(entry, static_cast<size_t>(end - entry));
    if (length >= prefix.size() && std::memcmp(entry, prefix.data(), prefix.size()) == 0) {
      std::memset(entry, 0, length);
    }
    entry += length + 1;
  }
}

}  // namespace

std::optional<std::string> withdraw_environment_variable(const std::string& name) {
  std::lock_guard<std::mutex> lock(withdrawn_mutex());
  if (const char* value = std::getenv(name.c_str())) withdrawn()[name] = value;
  // unsetenv first: `environ` must not point into bytes about to be erased.
  ::unsetenv(name.c_str());
  erase_from_initial_block(name);
  const auto found = withdrawn().find(name);
  if (found == withdrawn().end()) return std::nullopt;
  return found->second;
}

std::optional<std::string> withdrawn_value(const std::string& name) {
  std::lock_guard<std::mutex> lock(withdrawn_mutex());
  const auto found = withdrawn().find(name);
  if (found == withdrawn().end()) return std::nullopt;
  return found->second;
}

void withdraw_secret_environment() {
  static const std::string kSuffix = "_API_KEY";
  std::vector<std::string> names;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    if (name.size() > kSuffix.size() &&
        name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0) {
      names.push_back(name);
    }
  }
  for (const std::string& name : names) withdraw_environment_variable(name);
}

}  // namespace kforge
