// The roofline of report.html (issue 22): the reference and the best of a finished run placed
// on one plot against what the device can do, for every task. Built from result.json alone:
// the task's FLOPs and minimum bytes per call of the timed workload ("flops", "bytes_moved"),
// the device's copy bandwidth and f32 peak ("device"), the final rung's medians ("final") and,
// where Nsight Compute profiled the best, its measured DRAM traffic and kernel time ("profile").
//
// With a FLOP count the plot is the classic roofline: x the arithmetic intensity (FLOPs over
// the minimum bytes, log), y GFLOP/s (log), the roof min(peak, intensity x bandwidth). A task
// that counts no FLOPs has no intensity and no FLOP/s: its plot keeps the memory roof alone,
// x the bytes a call moves and y the GB/s achieved on them, and says so on the plot. Whatever
// the device did not report (a cpu has no f32 peak) is named on the plot, never made up.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kforge::report {

/// The roofline section of `result` (a finished run's result.json with a best and a final
/// rung): its heading, the chart "roofline" and a note on how to read it. Marks: one
/// "mark reference" and one "mark best" (at the final rung's medians), and one "mark profiled"
/// when the profile has DRAM bytes and kernel time (the best at its measured traffic). The roof
/// is one polyline "line roof" when the device reported a bandwidth or a peak, none otherwise.
/// Returns a note instead of a chart when the run recorded neither FLOPs nor bytes, and ""
/// when it has no final rung (nothing measured to place).
std::string roofline_section(const nlohmann::json& result);

}  // namespace kforge::report
