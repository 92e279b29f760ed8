"""The fork server of reference workers (kforge_torch/fork_server.py): a real server process,
real forked workers speaking the worker protocol, refusals and kills."""

import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER_ARGV = ["-m", "kforge_torch", "worker", "--backend", "cpu", "--device", "0"]


def server_environment():
    environment = dict(os.environ)
    environment["PYTHONPATH"] = PYTHON_DIR
    return environment


def entries(environment):
    return ["%s=%s" % item for item in environment.items()]


class ForkServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        cls.socket_path = os.path.join(cls.folder.name, "socket")
        cls.environment = server_environment()
        cls.server = subprocess.Popen(
            [sys.executable, "-m", "kforge_torch", "fork-server", "--socket", cls.socket_path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=cls.environment,
            cwd=PYTHON_DIR)
        ready = cls.server.stdout.readline()
        if ready != b"ready\n":
            raise AssertionError("the fork server did not start: %r" % ready)

    @classmethod
    def tearDownClass(cls):
        cls.server.stdin.close()
        cls.server.wait(timeout=10)
        cls.server.stdout.close()
        cls.folder.cleanup()

    def connect(self):
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        connection.connect(self.socket_path)
        self.addCleanup(connection.close)
        return connection

    def request(self, argv=WORKER_ARGV, environment=None, cwd=PYTHON_DIR):
        """(connection, first answer dict, sender pid from SCM_CREDENTIALS or 0, write end of the
        child's stdin, read end of its stdout)."""
        connection = self.connect()
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        body = {"argv": argv, "environment": entries(environment or self.environment),
                "cwd": cwd, "sandbox": ""}
        connection.sendmsg([(json.dumps(body) + "\n").encode()],
                           [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                             struct.pack("3i", stdin_read, stdout_write, 2))])
        os.close(stdin_read)
        os.close(stdout_write)
        self.addCleanup(lambda: [os.close(fd) for fd in (stdin_write, stdout_read)
                                 if _is_open(fd)])
        data, ancillary, _, _ = connection.recvmsg(4096, socket.CMSG_SPACE(12))
        sender = 0
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                sender = struct.unpack("3i", payload[:12])[0]
        return connection, json.loads(data.decode()), sender, stdin_write, stdout_read

    def end_of(self, connection, timeout_s=10.0):
        connection.settimeout(timeout_s)
        data = b""
        while not data.endswith(b"\n"):
            chunk = connection.recv(4096)
            if not chunk:
                break
            data += chunk
        return json.loads(data.decode())

    def test_forks_a_worker_that_speaks_the_protocol_and_reports_its_exit(self):
        connection, answer, sender, stdin_write, stdout_read = self.request()
        self.assertEqual(answer["pid"], sender)  # same namespace here
        os.kill(sender, 0)  # alive
        os.write(stdin_write, b'{"cmd": "hello", "id": 1, "token": "t"}\n')
        reply = json.loads(_read_line(stdout_read))
        self.assertTrue(reply["ok"])
        self.assertEqual(reply["id"], 1)
        self.assertEqual(reply["backend"], "cpu")
        self.assertEqual(os.getpgid(sender), sender)  # a process group of its own
        os.close(stdin_write)  # EOF: the worker exits 0
        self.assertEqual(self.end_of(connection), {"exit": 0})

    def test_the_child_gets_the_requested_folder(self):
        with tempfile.TemporaryDirectory() as elsewhere:
            connection, answer, sender, stdin_write, _ = self.request(cwd=elsewhere)
            self.assertEqual(os.readlink("/proc/%d/cwd" % sender),
                             os.path.realpath(elsewhere))
            os.close(stdin_write)
            self.assertEqual(self.end_of(connection), {"exit": 0})

    def test_refuses_another_environment_naming_what_differs(self):
        environment = dict(self.environment, KFORGE_SOMETHING_ELSE="1")
        _, answer, _, _, _ = self.request(environment=environment)
        self.assertIn("refused", answer)
        self.assertIn("KFORGE_SOMETHING_ELSE", answer["refused"])

    def test_refuses_a_command_other_than_the_reference_worker(self):
        argv = ["-m", "kforge_torch", "candidate-worker", "--backend", "cpu", "--device", "0"]
        _, answer, _, _, _ = self.request(argv=argv)
        self.assertIn("refused", answer)
        self.assertIn("serves only", answer["refused"])

    def test_refuses_another_sandbox(self):
        connection = self.connect()
        body = {"argv": WORKER_ARGV, "environment": entries(self.environment), "cwd": "",
                "sandbox": "bubblewrap"}
        fd = os.open(os.devnull, os.O_RDONLY)
        connection.sendmsg([(json.dumps(body) + "\n").encode()],
                           [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", fd, fd, fd))])
        os.close(fd)
        answer = self.end_of(connection)
        self.assertIn("sandbox", answer["refused"])

    def test_a_malformed_request_is_refused_and_the_server_goes_on(self):
        connection = self.connect()
        connection.sendall(b"not json\n")
        self.assertIn("refused", self.end_of(connection))
        # Still serving.
        connection, answer, _, stdin_write, _ = self.request()
        self.assertIn("pid", answer)
        os.close(stdin_write)
        self.assertEqual(self.end_of(connection), {"exit": 0})

    def test_kill_request_kills_the_worker(self):
        connection, answer, sender, _, _ = self.request()
        connection.sendall(b"kill\n")
        self.assertEqual(self.end_of(connection), {"signal": 9})
        self.assertFalse(_alive(sender))

    def test_a_client_that_leaves_takes_its_worker_with_it(self):
        connection, answer, sender, _, _ = self.request()
        connection.close()
        deadline = time.time() + 10
        while _alive(sender) and time.time() < deadline:
            time.sleep(0.05)
        self.assertFalse(_alive(sender))


class ForkServerLifetimeTest(unittest.TestCase):
    def test_ends_at_stdin_eof_killing_its_workers_and_removing_its_socket(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "socket")
            environment = server_environment()
            server = subprocess.Popen(
                [sys.executable, "-m", "kforge_torch", "fork-server", "--socket", path],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment, cwd=PYTHON_DIR)
            self.assertEqual(server.stdout.readline(), b"ready\n")
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.connect(path)
            stdin_read, stdin_write = os.pipe()
            body = {"argv": WORKER_ARGV, "environment": entries(environment), "cwd": "",
                    "sandbox": ""}
            connection.sendmsg([(json.dumps(body) + "\n").encode()],
                               [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                 struct.pack("3i", stdin_read, 2, 2))])
            os.close(stdin_read)
            pid = json.loads(connection.recv(4096).decode())["pid"]
            server.stdin.close()
            self.assertEqual(server.wait(timeout=10), 0)
            server.stdout.close()
            self.assertFalse(os.path.exists(path))
            self.assertFalse(_alive(pid))
            os.close(stdin_write)
            connection.close()

    def test_a_socket_path_too_long_is_an_error_naming_it(self):
        path = "/tmp/" + "x" * 120
        result = subprocess.run(
            [sys.executable, "-m", "kforge_torch", "fork-server", "--socket", path],
            stdin=subprocess.DEVNULL, capture_output=True, env=server_environment(),
            cwd=PYTHON_DIR, timeout=60)
        self.assertEqual(result.returncode, 2)
        self.assertIn(b"longer than 107 bytes", result.stderr)


def _read_line(fd, timeout_s=30.0):
    deadline = time.time() + timeout_s
    data = b""
    while not data.endswith(b"\n") and time.time() < deadline:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    return data.decode()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is not alive: the server reaps its children.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


if __name__ == "__main__":
    unittest.main()
