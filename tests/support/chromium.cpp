#include "support/chromium.h"

#include <cstdlib>

namespace kforge::testing {
namespace fs = std::filesystem;

std::string find_chromium() {
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "";
  for (const char* name : {"chromium", "chromium-browser"}) {
    size_t start = 0;
    while (start <= dirs.size()) {
      const size_t end = dirs.find(':', start);
      const fs::path candidate = fs::path(dirs.substr(start, end - start)) / name;
      if (fs::exists(candidate)) return candidate.string();
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return "";
}

HeadlessChromium::HeadlessChromium(std::string executable, fs::path profile_dir)
    : executable_(std::move(executable)), profile_dir_(std::move(profile_dir)) {}

std::vector<std::string> HeadlessChromium::base_args() const {
  return {executable_,
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--user-data-dir=" + profile_dir_.string(),
          "--enable-logging=stderr",
          "--v=0"};
}

process::CommandResult HeadlessChromium::dump_dom(const fs::path& page) const {
  std::vector<std::string> args = base_args();
  args.push_back("--dump-dom");
  args.push_back("file://" + fs::absolute(page).string());
  return process::run_command(args, 120);
}

process::CommandResult HeadlessChromium::screenshot(const fs::path& page, const fs::path& png,
                                                    int height_px) const {
  std::vector<std::string> args = base_args();
  args.push_back("--window-size=1200," + std::to_string(height_px));
  args.push_back("--screenshot=" + png.string());
  args.push_back("file://" + fs::absolute(page).string());
  return process::run_command(args, 120);
}

}  // namespace kforge::testing
