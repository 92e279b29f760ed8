#include "process/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "common/error.h"

namespace kforge::process {
namespace {

SpawnOptions shell(const std::string& script) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", script};
  return options;
}

/// True if `pid` exists and is not a zombie (a reparented, killed child may linger as one).
bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

TEST(Subprocess, EchoesLinesThroughPipes) {
  SpawnOptions options;
  options.argv = {"cat"};
  Subprocess child(options);
  ASSERT_TRUE(child.write_line("hello", 5));
  ASSERT_TRUE(child.write_line("world", 5));
  std::string line;
  ASSERT_EQ(child.read_line(&line, 5), ReadStatus::line);
  EXPECT_EQ(line, "hello");
  ASSERT_EQ(child.read_line(&line, 5), ReadStatus::line);
  EXPECT_EQ(line, "world");
  child.close_stdin();
  EXPECT_EQ(child.read_line(&line, 5), ReadStatus::eof);
  auto status = child.wait(5);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(status->exited);
  EXPECT_EQ(status->exit_code, 0);
}

TEST(Subprocess, ReadLineTimesOut) {
  Subprocess child(shell("sleep 5"));
  std::string line;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(child.read_line(&line, 0.2), ReadStatus::timeout);
  const double waited_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited_s, 0.19);
  EXPECT_LT(waited_s, 2.0);
  EXPECT_FALSE(child.wait(0.05).has_value());
  ExitStatus status = child.kill();
  EXPECT_FALSE(status.exited);
  EXPECT_EQ(status.signal, SIGKILL);
}

TEST(Subprocess, ReportsExitCodeAndSignal) {
  Subprocess exits(shell("exit 3"));
  auto status = exits.wait(5);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(status->exited);
  EXPECT_EQ(status->exit_code, 3);
  EXPECT_EQ(status->describe(), "exit code 3");

  Subprocess killed(shell("kill -SEGV $$"));
  status = killed.wait(5);
  ASSERT_TRUE(status.has_value());
  EXPECT_FALSE(status->exited);
  EXPECT_EQ(status->signal, SIGSEGV);
  EXPECT_EQ(status->describe(), "killed by signal 11 (SIGSEGV: Segmentation fault)");
}

TEST(Subprocess, AWrappersSignalExitIsUnwrapped) {
  // sh, like bubblewrap, exits with 128 + N when its command dies by signal N.
  Subprocess wrapper(shell("sh -c 'kill -SEGV $$'; exit $?"));
  auto status = wrapper.wait(5);
  ASSERT_TRUE(status.has_value());
  ASSERT_TRUE(status->exited);
  EXPECT_EQ(status->exit_code, 139);
  const ExitStatus command = unwrap_signal_exit(*status);
  EXPECT_FALSE(command.exited);
  EXPECT_EQ(command.signal, SIGSEGV);
  EXPECT_EQ(unwrap_signal_exit(ExitStatus{true, 3, 0}).describe(), "exit code 3");
  EXPECT_EQ(unwrap_signal_exit(ExitStatus{true, 255, 0}).describe(), "exit code 255");
}

TEST(Subprocess, EofWhenChildDiesMidRequest) {
  Subprocess child(shell("read x; printf partial; exit 1"));
  ASSERT_TRUE(child.write_line("go", 5));
  std::string line;
  EXPECT_EQ(child.read_line(&line, 5), ReadStatus::eof);
  auto status = child.wait(5);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->exit_code, 1);
}

TEST(Subprocess, WriteToExitedChildFailsWithoutSigpipe) {
  Subprocess child(shell("exit 0"));
  ASSERT_TRUE(child.wait(5).has_value());
  // The pipe is closed after reaping; and a child that exited without reading gives EPIPE.
  EXPECT_FALSE(child.write_line("anyone?", 1));
  SpawnOptions options = shell("exec 0<&-; sleep 5");
  Subprocess closed_stdin(options);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(closed_stdin.write_line("anyone?", 1));
}

TEST(Subprocess, KillTakesTheWholeProcessGroup) {
  Subprocess child(shell("sleep 100 & echo $!; wait"));
  std::string line;
  ASSERT_EQ(child.read_line(&line, 5), ReadStatus::line);
  const pid_t grandchild = std::stoi(line);
  EXPECT_TRUE(process_alive(grandchild));
  child.kill();
  for (int i = 0; i < 100 && process_alive(grandchild); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(process_alive(grandchild));
}

TEST(Subprocess, ChildRunsInItsOwnProcessGroup) {
  Subprocess child(shell("ps -o pgid= -p $$ 2>/dev/null || cut -d' ' -f5 /proc/$$/stat"));
  std::string line;
  ASSERT_EQ(child.read_line(&line, 5), ReadStatus::line);
  EXPECT_EQ(std::stoi(line), child.pid());
}

TEST(Subprocess, ChildInheritsNoExtraDescriptors) {
  const int leaked = ::open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(leaked, 3);
  Subprocess child(shell("ls /proc/$$/fd"));
  auto status = child.wait(5);
  ::close(leaked);
  ASSERT_TRUE(status.has_value());
  std::string listing = child.take_stdout();
  // sh itself may hold one descriptor for the directory being listed by ls: that is ls's own.
  std::string fds;
  for (char c : listing) fds += c == '\n' ? ' ' : c;
  EXPECT_EQ(fds, "0 1 2 ");
}

TEST(Subprocess, CapturesStderrIntoABoundedRing) {
  SpawnOptions options = shell(
      "echo first >&2; i=0; while [ $i -lt 200 ]; do echo line$i >&2; "
      "i=$((i+1)); done; echo last >&2");
  options.stderr_tail_bytes = 64;
  Subprocess child(options);
  ASSERT_TRUE(child.wait(5).has_value());
  const std::string tail = child.stderr_tail();
  EXPECT_EQ(tail.size(), 64u);
  EXPECT_EQ(tail.substr(tail.size() - 5), "last\n");
  EXPECT_EQ(tail.find("first"), std::string::npos);
}

TEST(Subprocess, EnvironmentOverrideAndWorkingDirectory) {
  SpawnOptions options = shell("echo \"$KFORGE_PROBE:$HOME:$(pwd)\"");
  options.environment = std::vector<std::string>{"KFORGE_PROBE=yes"};
  options.cwd = "/tmp";
  Subprocess child(options);
  std::string line;
  ASSERT_EQ(child.read_line(&line, 5), ReadStatus::line);
  EXPECT_EQ(line, "yes::/tmp");
}

TEST(Subprocess, MissingProgramIsAnErrorNamingIt) {
  SpawnOptions options;
  options.argv = {"kforge-no-such-program-xyz", "--version"};
  try {
    Subprocess child(options);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kforge-no-such-program-xyz"), std::string::npos);
  }
}

TEST(Subprocess, OverlongLineIsOverflow) {
  SpawnOptions options = shell("head -c 5000 /dev/zero | tr '\\0' x; sleep 5");
  options.max_stdout_bytes = 1024;
  Subprocess child(options);
  std::string line;
  EXPECT_EQ(child.read_line(&line, 5), ReadStatus::overflow);
}

TEST(RunCommand, MergesOutputAndReportsExitCode) {
  CommandResult result = run_command({"/bin/sh", "-c", "echo out; echo err >&2; exit 4"}, 10);
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_EQ(result.signal, 0);
  EXPECT_FALSE(result.timed_out);
  EXPECT_FALSE(result.succeeded());
  EXPECT_EQ(result.output, "out\nerr\n");
  EXPECT_GE(result.duration_s, 0.0);
}

TEST(RunCommand, RunsInTheGivenDirectory) {
  CommandResult result = run_command({"pwd"}, 10, "/tmp");
  EXPECT_TRUE(result.succeeded());
  EXPECT_EQ(result.output, "/tmp\n");
}

TEST(RunCommand, TimeoutKillsTheGroup) {
  const auto start = std::chrono::steady_clock::now();
  CommandResult result = run_command({"/bin/sh", "-c", "sleep 30 & sleep 30"}, 0.3);
  const double waited_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.exit_code, -1);
  EXPECT_EQ(result.signal, SIGKILL);
  EXPECT_LT(waited_s, 5.0);
}

TEST(RunCommand, MissingCompilerIsAnError) {
  EXPECT_THROW(run_command({"/nonexistent/nvcc", "-V"}, 5), Error);
  try {
    run_command({"/nonexistent/nvcc", "-V"}, 5);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/nvcc"), std::string::npos);
  }
}

}  // namespace
}  // namespace kforge::process
