// The `kforge` command line: subcommands from one table, each option also settable from an
// environment variable (KFORGE_<OPTION>), named exit codes.
#pragma once

#include <string>
#include <vector>

#include "common/error.h"

namespace kforge::cli {

/// Named exit codes of the kforge executable.
enum class ExitCode : int {
  ok = 0,
  error = 1,          // harness or input error, message printed as "kforge: error: ...";
                      // suite: a task's run errored (bad task file, crash, timeout)
  usage = 2,          // bad command line
  not_all_correct = 3,  // optimize: the run found no correct candidate; suite: every task ran,
                        // but some found no correct candidate
  interrupted = 130,  // Ctrl-C
};

/// A bad command line found after parsing (e.g. an option `kforge suite` passes on to each
/// `kforge optimize`): printed as "kforge: error: <message>", exit code ExitCode::usage.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// Parses argv and runs the chosen subcommand; returns the exit code. Catches every exception
/// and prints it as "kforge: error: <message>". Ignores SIGPIPE for the process, so that a
/// closed stdout (`kforge ... | head`) does not kill a run.
int run_cli(int argc, char** argv);

}  // namespace kforge::cli
