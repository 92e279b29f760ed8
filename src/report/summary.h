// Human-readable views of a run's result.json (the one schema every output derives from).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kforge::report {

/// Markdown report: device, reference vs best with the confidence interval, bandwidth, and a
/// table of every candidate with its verdict and time.
std::string render_markdown(const nlohmann::json& result, const std::string& task_name);

/// The few lines printed at the end of `kforge optimize`.
std::string render_console_summary(const nlohmann::json& result, const std::string& task_name);

}  // namespace kforge::report
