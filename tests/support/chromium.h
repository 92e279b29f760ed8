// Opening kforge's HTML pages in a real browser (Debian's headless chromium, installed by
// scripts/setup) from the tests: find it, load a page and read back its DOM and console, and
// keep a screenshot of it.
#pragma once

#include <filesystem>
#include <string>

#include "process/subprocess.h"

namespace kforge::testing {

/// chromium (Debian) or chromium-browser from $PATH; "" when neither is installed (the browser
/// tests skip then, saying so).
std::string find_chromium();

/// A headless chromium with its profile in `profile_dir` (a folder of the test's own).
class HeadlessChromium {
 public:
  HeadlessChromium(std::string executable, std::filesystem::path profile_dir);

  /// Loads `page` and returns chromium's run: exit code, and its output, which holds the
  /// serialized DOM after the page loaded and any console message as a ":CONSOLE" log line.
  process::CommandResult dump_dom(const std::filesystem::path& page) const;

  /// Saves a PNG of `page` at 1200 px wide and `height_px` high into `png`.
  process::CommandResult screenshot(const std::filesystem::path& page,
                                    const std::filesystem::path& png, int height_px) const;

 private:
  std::vector<std::string> base_args() const;

  std::string executable_;
  std::filesystem::path profile_dir_;
};

}  // namespace kforge::testing
