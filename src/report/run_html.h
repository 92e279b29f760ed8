// report.html: a run directory as one self-contained page (inline SVG and CSS, no script, no
// network at view time), for people who would rather look than read a table of candidates.
// Built from the run's own files, so it can be written at any point of the run: events.jsonl
// (what happened so far), result.json (the final numbers, once the run finished), run.json (how
// it was started), memory_graph.json (the memory's graph) and the best kernel's source. A run
// that stopped half-way has a page saying so.
#pragma once

#include <filesystem>
#include <string>

namespace kforge::report {

/// The page of the run at `run_dir`. Sections: status and the command that reproduces the run;
/// best-so-far quick speedup against candidates and against device seconds (each candidate a
/// point coloured by verdict; chart ids "by-candidate", "by-device-seconds"); the rung funnel
/// ("funnel": candidates that reached rungs 0-3); the best's speedup per timed workload and at
/// the final rung with its confidence interval ("per-workload"); the final rung's times of the
/// reference and the best ("timings"); the roofline with the reference and the best on it, its
/// memory side alone when the task has no FLOP count ("roofline", roofline.h); the profiler's
/// diagnosis; the memory's graph with the directions and transitions the run used highlighted
/// (memory_graph.h; before the best's sections while the run has none); the path of the search
/// (the direction and strategy each candidate was made under); the best kernel's source.
/// Throws Error when `run_dir` holds no run.json (not a run directory).
std::string render_run_html(const std::filesystem::path& run_dir);

/// Writes render_run_html(run_dir) to run_dir/report.html atomically. Returns "" on success,
/// else why it could not (a report is a view: the caller warns, the run goes on).
std::string write_run_html(const std::filesystem::path& run_dir);

}  // namespace kforge::report
