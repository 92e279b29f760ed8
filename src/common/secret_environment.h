// Secrets (API keys) taken out of this process's environment, so that no child inherits them and
// no other process finds them in /proc/<kforge>/environ.
//
// unsetenv alone is not enough: it edits the `environ` array, but /proc/PID/environ shows the
// initial environment block, the bytes the kernel copied onto the stack at exec, and those
// stay. withdraw_environment_variable therefore also overwrites the variable's entries in that
// block in place with NUL bytes (the block's bounds are env_start and env_end of
// /proc/self/stat). Overwriting in place was chosen over re-executing kforge without the
// variable: a re-exec would need a second channel to hand the value to the new image, could only
// happen before anything else runs (api_key_env names its variable in a config file read later),
// and would double the start-up; the overwrite takes one pass over a few kilobytes.
//
// What is withdrawn stays in this process's memory (withdrawn_value, process_env in
// llm/llm_config.h); a PID namespace around the workers (worker/sandbox.h) keeps that memory
// out of a candidate's reach.
#pragma once

#include <optional>
#include <string>

namespace kforge {

/// Takes variable `name` out of the environment: returns its value (nullopt when it is unset and
/// was never withdrawn), removes it from `environ` (children spawned afterwards do not inherit
/// it) and erases every "NAME=..." entry of the initial environment block. Calling it again
/// returns the value withdrawn the first time. Thread-safe with itself, but not with a
/// concurrent getenv/setenv elsewhere; call it before starting threads. Never throws for an
/// unreadable /proc: the block is then left as it is and unsetenv still applies.
std::optional<std::string> withdraw_environment_variable(const std::string& name);

/// The value a withdraw_environment_variable call took for `name`, or nullopt.
std::optional<std::string> withdrawn_value(const std::string& name);

/// Withdraws the variables whose names mark them as secrets: every name ending in "_API_KEY"
/// (KFORGE_LLM_API_KEY, OPENAI_API_KEY, DEEPSEEK_API_KEY, ...). kforge's entry point calls it
/// first, before any child (compiler, profiler, Python derivation, worker) is spawned.
void withdraw_secret_environment();

}  // namespace kforge
