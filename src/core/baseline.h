// What a speedup is measured against (issue 18, "Baselines"), and how the cache of baseline
// times is used. Vocabulary every module shares: the evaluation plane times the baselines, the
// search reports them, the report renders them, the CLI chooses them.
#pragma once

#include <string>

namespace kforge {

/// The baseline a run's speedups are reported against, besides the reference as given.
///   eager:   the reference only (for a PyTorch problem, the module as PyTorch eager runs it);
///   compile: also torch.compile of the reference module (a PyTorch reference only), timed
///            interleaved with the reference and the best at the final rung; its compile time
///            is reported apart.
/// String forms "eager" and "compile" (--baseline, result.json "baseline", the worker
/// protocol's TimeRequest::baseline).
enum class BaselineKind { eager, compile };
std::string to_string(BaselineKind kind);
/// Inverse of to_string; throws Error on an unknown name, listing the known ones.
BaselineKind parse_baseline_kind(const std::string& name);

/// How a run uses the cache of per-device baseline times (report/baseline_cache.h), by
/// --baseline-cache: "use" (read what an earlier run measured where re-measuring buys nothing,
/// and write what this run measured), "refresh" (measure again and overwrite), "off" (neither).
enum class BaselineCacheMode { use, refresh, off };
std::string to_string(BaselineCacheMode mode);
/// Inverse of to_string; throws Error on an unknown name, listing the known ones.
BaselineCacheMode parse_baseline_cache_mode(const std::string& name);

}  // namespace kforge
