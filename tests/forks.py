"""Real processes without a fresh interpreter each: a fork server.

The end-to-end and race tests start well over a hundred Python processes (local servers,
the halves of a run, the example bank, event writers), and each spent about a second of
CPU importing Strands, boto3 and Powertools before doing anything. `ForkServer` starts
one single-threaded process per test process that imports those libraries once, and
forks a child from it for each `spawn`. A child is a real process: its own pid, its own
memory, its own descriptors, killed for real by SIGKILL. It runs its module or script as
`python -m MODULE` or `python SCRIPT` would, as `__main__`, with the argv, working
directory, environment and output it was given; Interlock's own modules are imported in
the child, after its environment is set, never in the server.

`Forked` answers as much of `subprocess.Popen` as the tests use (`pid`, `poll`, `wait`,
`send_signal`, `kill`, `terminate`, `returncode`, `stderr`). Run as
`python -m tests.forks`, the module is the server itself.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
# What a child would import first and longest; nothing of Interlock's (it reads its
# environment on import, and each child has its own).
PRELOAD = ("boto3", "strands", "aws_lambda_powertools", "pydantic", "mcp", "httpx", "jsonschema")
_MESSAGE = 1 << 16
_DESCRIPTORS = 2  # a child's stdout and stderr


class Forked:
    """One child of the fork server, answering like the `subprocess.Popen` it stands for."""

    def __init__(self, server: ForkServer, pid: int, stderr: IO[bytes] | None) -> None:
        self.pid = pid
        self.stderr = stderr
        self._server = server

    @property
    def returncode(self) -> int | None:
        return self._server.exit_code(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        code = self._server.wait_for(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # ended, not yet reported
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ForkServer:
    """The fork server of this test process, over a socket pair that carries each
    child's spec and descriptors in, and its pid and exit code out."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.forks", str(theirs.fileno())],
            cwd=ROOT,
            env=env,
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self._socket = ours
        self._sending = threading.Lock()
        self._changed = threading.Condition()
        self._started: dict[int, int] = {}  # request number -> pid
        self._exits: dict[int, int] = {}  # pid -> exit code (negative: the signal)
        self._requests = 0
        self._reader = threading.Thread(target=self._read, name="fork-server", daemon=True)
        self._reader.start()

    def spawn(
        self,
        argv: list[str],
        *,
        cwd: Path | str | None = None,
        env: dict[str, str] | None = None,
        stdout: IO[Any] | int | None = None,
        stderr: IO[Any] | int | None = None,
    ) -> Forked:
        """Start `argv` (`[python, "-m", module, ...]` or `[python, script, ...]`) as a
        child; `stdout` and `stderr` as `subprocess.Popen` takes them (a file, `PIPE`,
        `STDOUT` for stderr, or None for this process's own)."""
        out = _descriptor(stdout, 1)
        err_read: IO[bytes] | None = None
        if stderr == subprocess.STDOUT:
            err = out
        elif stderr == subprocess.PIPE:
            read, write = os.pipe()
            err_read, err = os.fdopen(read, "rb"), write
        else:
            err = _descriptor(stderr, 2)
        with self._sending:
            self._requests += 1
            number = self._requests
            spec = {
                "number": number,
                "argv": argv[1:],
                "cwd": str(cwd or os.getcwd()),
                "env": dict(os.environ if env is None else env),
            }
            socket.send_fds(self._socket, [json.dumps(spec).encode()], [out, err])
        if stderr == subprocess.PIPE:
            os.close(err)
        with self._changed:
            assert self._changed.wait_for(lambda: number in self._started, timeout=30)
            pid = self._started.pop(number)
        return Forked(self, pid, err_read)

    def exit_code(self, pid: int) -> int | None:
        with self._changed:
            return self._exits.get(pid)

    def wait_for(self, pid: int, timeout: float | None) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits, timeout=timeout)
            return self._exits.get(pid)

    def close(self) -> None:
        self._socket.shutdown(socket.SHUT_WR)  # the server ends what still runs, and leaves
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._socket.close()

    def _read(self) -> None:
        while True:
            try:
                message = self._socket.recv(_MESSAGE)
            except OSError:
                return
            if not message:
                return
            reply = json.loads(message)
            with self._changed:
                if "pid" in reply:
                    self._started[reply["number"]] = reply["pid"]
                else:
                    self._exits[reply["exit"]] = reply["code"]
                self._changed.notify_all()


def _descriptor(target: IO[Any] | int | None, default: int) -> int:
    if target is None:
        return default
    if isinstance(target, int):
        raise ValueError("a fork server child writes to a file, a pipe, or the parent's own")
    return target.fileno()


_lock = threading.Lock()
_servers: dict[int, ForkServer] = {}


def fork_server() -> ForkServer:
    """This test process's fork server, started on first use and stopped at its exit."""
    with _lock:
        server = _servers.get(os.getpid())
        if server is None:
            server = _servers[os.getpid()] = ForkServer()
            atexit.register(server.close)
        return server


# -- the server -------------------------------------------------------------------------------


def main(channel: int) -> int:
    for name in PRELOAD:
        importlib.import_module(name)
    sock = socket.socket(fileno=channel)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_write)
    own = set(os.environ.get("PYTHONPATH", "").split(os.pathsep))
    base_path = [p for p in sys.path[1:] if p not in own]
    children: set[int] = set()
    while True:
        try:
            ready, _, _ = select.select([sock, wake_read], [], [])
        except InterruptedError:
            ready = [wake_read]
        if wake_read in ready:
            os.read(wake_read, 4096)
        _reap(sock, children)
        if sock not in ready:
            continue
        message, fds, _, _ = socket.recv_fds(sock, _MESSAGE, _DESCRIPTORS)
        if not message:
            break
        spec = json.loads(message)
        pid = os.fork()
        if pid == 0:
            os.close(wake_read)
            os.close(wake_write)
            sock.close()
            _child(spec, fds, base_path)
        for fd in fds:
            os.close(fd)
        children.add(pid)
        sock.send(json.dumps({"number": spec["number"], "pid": pid}).encode())
    # The test process is done: nothing will stop what it left running, so this does.
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in children:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    return 0


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        with contextlib.suppress(OSError):  # the test process has gone: nobody asks
            sock.send(json.dumps({"exit": pid, "code": code}).encode())


def _child(spec: dict[str, Any], fds: list[int], base_path: list[str]) -> None:
    """Become the process `spec` describes; never returns."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    code = 0
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        for target, fd in zip((0, 1, 2), (devnull, *fds), strict=True):
            os.dup2(fd, target)
        os.chdir(spec["cwd"])
        os.environ.clear()
        os.environ.update(spec["env"])
        args = spec["argv"]
        # sys.path as the interpreter would set it: the script's folder (or, for `-m`, the
        # working directory), then PYTHONPATH, then the installation's own.
        extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if args[0] == "-m":
            first, sys.argv = os.getcwd(), [args[1], *args[2:]]
        else:
            first, sys.argv = str(Path(args[0]).resolve().parent), list(args)
        sys.path[:] = [first, *extra, *base_path]
        if args[0] == "-m":
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as leaving:
        code = _exit_code(leaving.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
