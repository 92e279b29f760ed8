"""A fork server of PyTorch reference workers:
`python3 -m kforge_torch fork-server --socket PATH [--sandbox MECHANISM]`.

A reference worker's start is mostly `import torch` (about 1.2 s of the 1.6-1.8 s a suite child
waited for its torch worker on an H100, bench/torch/README.md, session 14). This process imports
torch and kforge's worker modules once, without touching the device (CUDA is never initialized
here: a forked child could not use it), then forks a worker per request, as Python's
multiprocessing "forkserver" start method does: a child starts with everything imported and pays
only its device context.

Protocol, on a Unix stream socket at PATH (bound once the imports are done, so a client that finds
no socket falls back to starting the worker itself):
  client -> server: one JSON line {"argv": [...], "environment": ["NAME=value", ...],
      "cwd": "...", "sandbox": "..."} with three descriptors (SCM_RIGHTS): the child's stdin,
      stdout and stderr. argv is what follows the interpreter: ["-m", "kforge_torch", "worker",
      "--backend", B, "--device", N]; only the reference worker is served.
  server -> client: {"refused": "why"} and the connection closed, when the request is not one this
      server can serve exactly as a fresh process would run it (another command, another
      environment than the one it imported torch under, another sandbox, another working folder
      needed). Otherwise the forked child itself writes {"pid": N} (the client reads the child's
      pid in its own PID namespace from the message's SCM_CREDENTIALS) and later the server writes
      {"exit": CODE} or {"signal": N} when the child has ended, then closes the connection.
  client -> server: "kill" (or closing the connection) kills the child's process group.

The child is in a process group of its own (as posix_spawn'd workers are), with the requested
environment and working folder, default signal dispositions and no descriptor of the server's.
The server ends on SIGTERM, on EOF of its stdin, or when its socket file is removed; the children
it started are killed then.
"""

import argparse
import json
import os
import random
import selectors
import signal
import socket
import sys

MAX_REQUEST_BYTES = 1 << 20
SERVED_COMMANDS = (["-m", "kforge_torch", "worker"],)


class _Child:
    def __init__(self, pid, connection):
        self.pid = pid
        self.connection = connection


# What the sandbox's shell sets for the commands it runs: a worker started through it gets its
# own values, which are not the request's; a forked child keeps the server's.
SHELL_SET = ("PWD", "OLDPWD", "SHLVL", "_")


def _comparable(environment):
    """The sorted "NAME=value" entries of `environment` less those the sandbox's shell sets."""
    return sorted(e for e in environment if e.split("=", 1)[0] not in SHELL_SET)


def _refuse(connection, why):
    try:
        connection.sendall((json.dumps({"refused": why}) + "\n").encode())
    except OSError:
        pass
    connection.close()


def _receive_request(connection):
    """(request dict, [fds]) from one message; raises ValueError for a malformed one."""
    connection.settimeout(10.0)
    data, fds = b"", []
    while not data.endswith(b"\n"):
        chunk, ancillary, _flags, _address = connection.recvmsg(
            65536, socket.CMSG_SPACE(3 * 4))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                count = len(payload) // 4
                fds.extend(int.from_bytes(payload[4 * i:4 * i + 4], sys.byteorder)
                           for i in range(count))
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST_BYTES:
            break
    connection.settimeout(None)
    try:
        request = json.loads(data.decode("utf-8"))
    except ValueError:
        for fd in fds:
            os.close(fd)
        raise ValueError("the request is not one JSON line")
    if not isinstance(request, dict) or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError("expected a JSON object and 3 descriptors (stdin, stdout, stderr), got "
                         "%d descriptors" % len(fds))
    return request, fds


class ForkServer:
    """Serves fork requests on `socket_path` for workers run under `sandbox` (the mechanism's
    name, "" for none) and this process's environment at start."""

    def __init__(self, socket_path, sandbox):
        self.socket_path = socket_path
        self.sandbox = sandbox
        self.environment = _comparable("%s=%s" % item for item in os.environ.items())
        self.children = {}  # pid -> _Child
        self.selector = selectors.DefaultSelector()
        self.stopping = False
        self.listener = None
        self._wakeup_read, self._wakeup_write = os.pipe()

    def why_not(self, request):
        """Why `request` cannot be served here exactly as a fresh process would run it; "" when
        it can."""
        argv = request.get("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return "argv: expected a list of strings"
        if not any(argv[:len(command)] == command for command in SERVED_COMMANDS):
            return "serves only `%s`, not `%s`" % (
                " ".join(SERVED_COMMANDS[0]), " ".join(argv[:3]))
        if request.get("sandbox", "") != self.sandbox:
            return "its workers run under sandbox '%s', the request's under '%s'" % (
                self.sandbox, request.get("sandbox", ""))
        environment = request.get("environment")
        if not isinstance(environment, list) or _comparable(environment) != self.environment:
            theirs = set(_comparable(environment)) if isinstance(environment, list) else set()
            differ = sorted({e.split("=", 1)[0] for e in theirs.symmetric_difference(
                self.environment)})
            return "torch was imported under another environment (differs in %s)" % (
                ", ".join(differ) or "its type")
        cwd = request.get("cwd", "")
        if cwd and not os.path.isdir(cwd):
            return "cwd %s: not a folder" % cwd
        return ""

    def _fork(self, connection, request, fds):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                self._become_child(connection, request, fds)
                from kforge_torch import __main__ as entry
                code = entry.main(request["argv"][2:])
                sys.stdout.flush()
                sys.stderr.flush()
            except SystemExit as e:  # argparse
                code = e.code if isinstance(e.code, int) else 2
            except BaseException as e:  # reported on the child's stderr, never to the server
                try:
                    sys.stderr.write("kforge-torch fork-server child: error: %s\n" % e)
                    sys.stderr.flush()
                except Exception:
                    pass
            os._exit(code if isinstance(code, int) else 1)
        for fd in fds:
            os.close(fd)
        self.children[pid] = _Child(pid, connection)
        self.selector.register(connection, selectors.EVENT_READ, ("child", pid))

    def _become_child(self, connection, request, fds):
        os.setpgid(0, 0)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE,
                    signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for fd, target in zip(fds, (0, 1, 2)):
            os.dup2(fd, target)
        keep = {0, 1, 2, connection.fileno()}
        os.closerange(3, connection.fileno())
        os.closerange(connection.fileno() + 1, max(keep) + 65536)
        shell_set = {k: v for k, v in os.environ.items() if k in SHELL_SET}
        os.environ.clear()
        os.environ.update(dict(e.split("=", 1) for e in request["environment"] if "=" in e))
        os.environ.update(shell_set)
        started_in = os.getcwd()
        if request.get("cwd"):
            os.chdir(request["cwd"])
            if "PWD" in os.environ:
                os.environ["PWD"] = request["cwd"]
            # `python3 -m` puts the folder it started in first on sys.path.
            if sys.path and sys.path[0] == started_in:
                sys.path[0] = request["cwd"]
        random.seed()  # not the server's state, shared by every child
        sys.argv = ["kforge_torch"] + request["argv"][2:]
        # The client reads this line's credentials: the child's pid in its own namespace.
        connection.sendall((json.dumps({"pid": os.getpid()}) + "\n").encode())
        connection.close()

    def _accept(self):
        connection, _ = self.listener.accept()
        try:
            request, fds = _receive_request(connection)
        except (ValueError, OSError) as e:
            _refuse(connection, str(e))
            return
        why = self.why_not(request)
        if why:
            for fd in fds:
                os.close(fd)
            _refuse(connection, why)
            return
        self._fork(connection, request, fds)

    def _kill(self, child):
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass

    def _reap(self, block=False):
        """Reports each child that has ended: its group killed first (stragglers), then reaped,
        so that the group id cannot be reused before the kill. With `block`, waits for every
        child to end (at shutdown, after each was sent SIGKILL: a kill is delivered, not done,
        when kill(2) returns, and a child the server leaves unreaped outlives it for a while)."""
        flags = os.WEXITED | os.WNOWAIT | (0 if block else os.WNOHANG)
        for pid, child in list(self.children.items()):
            try:
                info = os.waitid(os.P_PID, pid, flags)
            except ChildProcessError:
                info = None
            if info is None:
                continue
            self._kill(child)
            _, status = os.waitpid(pid, 0)
            if os.WIFEXITED(status):
                end = {"exit": os.WEXITSTATUS(status)}
            else:
                end = {"signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else 9}
            try:
                child.connection.sendall((json.dumps(end) + "\n").encode())
            except OSError:
                pass
            self.selector.unregister(child.connection)
            child.connection.close()
            del self.children[pid]

    def _client_message(self, pid):
        child = self.children.get(pid)
        if child is None:
            return
        try:
            data = child.connection.recv(4096)
        except OSError:
            data = b""
        if not data or b"kill" in data:  # the client left, or asks: the group goes
            self._kill(child)

    def serve(self):
        """Binds the socket and serves until stopped; returns the exit status."""
        os.set_blocking(self._wakeup_write, False)
        os.set_blocking(self._wakeup_read, False)
        signal.set_wakeup_fd(self._wakeup_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        partial = self.socket_path + ".binding"
        if os.path.exists(partial):
            os.unlink(partial)
        self.listener.bind(partial)
        self.listener.listen(64)
        os.rename(partial, self.socket_path)  # clients see the socket once it is listening
        identity = os.stat(self.socket_path).st_ino
        self.selector.register(self.listener, selectors.EVENT_READ, ("listener", None))
        self.selector.register(self._wakeup_read, selectors.EVENT_READ, ("wakeup", None))
        self.selector.register(sys.stdin, selectors.EVENT_READ, ("stdin", None))
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        while not self.stopping:
            for key, _ in self.selector.select(timeout=1.0):
                kind, pid = key.data
                if kind == "listener":
                    self._accept()
                elif kind == "wakeup":
                    try:
                        os.read(self._wakeup_read, 4096)
                    except BlockingIOError:
                        pass
                elif kind == "stdin":
                    if not os.read(sys.stdin.fileno(), 4096):
                        self.stopping = True
                else:
                    self._client_message(pid)
            self._reap()
            try:
                if os.stat(self.socket_path).st_ino != identity:
                    self.stopping = True
            except OSError:
                self.stopping = True
        for child in self.children.values():
            self._kill(child)
        self._reap(block=True)
        try:
            if os.stat(self.socket_path).st_ino == identity:
                os.unlink(self.socket_path)
        except OSError:
            pass
        return 0

    def _stop(self, *_):
        self.stopping = True


def main(argv):
    """`fork-server --socket PATH [--sandbox MECHANISM]`; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python3 -m kforge_torch fork-server")
    parser.add_argument("--socket", required=True, help="path of the Unix socket to serve on")
    parser.add_argument("--sandbox", default="",
                        help="the sandbox mechanism this server runs under (kforge's name)")
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401  (the point: children start with it imported)
        from kforge_torch import worker  # noqa: F401
        from kforge_torch import __main__ as entry  # noqa: F401
    except Exception as e:
        sys.stderr.write("kforge-torch fork-server: error: cannot import torch: %s\n" % e)
        return 1
    if len(os.fsencode(args.socket)) >= 108:
        sys.stderr.write("kforge-torch fork-server: error: socket path longer than 107 bytes: "
                         "%s\n" % args.socket)
        return 2
    return ForkServer(args.socket, args.sandbox).serve()
