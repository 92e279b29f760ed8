// TRICK fake_results (must fail: rejected_by_policy). Computes nothing; instead prints a forged
// worker-protocol success line to stdout and writes it to every file descriptor 0..64, hoping
// one of them is the pipe the evaluator reads results from. Caught because the worker protocol
// does not trust candidate-writable channels: real replies carry the worker's session token, so
// a line without it is a forgery; the worker is killed and the candidate rejected. (Were the
// line ignored instead, the real check would run and find y still NaN.)
#include <kforge/kernel.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>

KFORGE_API int kforge_run(const kforge_args* args) {
  (void)args;
  static const char kLine[] = "{\"id\":1,\"ok\":true,\"verdict\":\"ok\"}\n";
  std::fputs(kLine, stdout);
  std::fflush(stdout);
  for (int fd = 0; fd <= 64; ++fd) {
    ssize_t written = write(fd, kLine, std::strlen(kLine));
    (void)written;
  }
  return 0;
}
