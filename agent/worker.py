"""Tool calls run in worker processes, so that a call's time limit bounds its work, not only its answer.

A thread cannot be stopped in Python, and an analysis spends its time in pandas and NumPy as much as
in DuckDB (whose ``interrupt()`` reaches only the query under way); a process can. Each call goes to
an idle worker (``python -m agent.worker``, the same tools over the same store), one call at a time
per worker; when the call passes its time limit the worker is killed (its CPU and memory go back at
once) and the call answers with an error saying so. The next call gets a fresh worker.

A worker keeps what the library caches (the analyses per run, the read connections) from call to
call, as the server process did; a killed worker's cache goes with it. Boot time (the imports, a
second or two) is not counted in a call's limit: a worker is started with the server and after each
kill, and a call waits for it to be ready first.

The protocol is JSON lines over the worker's stdin and stdout: ``{"tool", "args"}`` in, ``{"ok":
answer}`` or ``{"error": message}`` out; the worker writes its first line ``{"ready": true}`` when
its imports are done, and leaves when its stdin closes (the server gone, whatever the way). Anything
else the libraries print goes to stderr, never into the protocol.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .tools import TOOLS, AgentError, Settings

BOOT_SECONDS = 300.0  # a worker's imports, on a loaded machine


class TimeLimitExceeded(AgentError):
    """A call passed its time limit: its worker was killed."""


class WorkerFailed(AgentError):
    """A worker ended or broke its protocol (killed from outside, out of memory)."""


@dataclass
class Worker:
    """One worker process and the bytes it wrote that are not yet a line."""

    proc: subprocess.Popen[bytes]
    ready: bool = False
    pending: bytearray = field(default_factory=bytearray)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()

    def read_line(self, seconds: float | None) -> bytes | None:
        """The next line the worker writes, or None when ``seconds`` pass first; WorkerFailed when it ends."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = None if seconds is None else time.monotonic() + seconds
        while b"\n" not in self.pending:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                code = self.proc.wait()
                raise WorkerFailed(f"the worker process ended (exit code {code}) before it answered")
            self.pending += chunk
        line, _, rest = bytes(self.pending).partition(b"\n")
        self.pending = bytearray(rest)
        return line


class Ticket:
    """One call in flight: the worker it runs on, so that a cancelled call can stop it."""

    def __init__(self) -> None:
        self.worker: Worker | None = None
        self.cancelled = False


class Pool:
    """At most ``size`` workers over one store; each call takes an idle one (starting one when none is
    idle and fewer than ``size`` run, else waiting for one)."""

    def __init__(self, settings: Settings, size: int = 1):
        if size < 1:
            raise AgentError(f"workers must be at least 1 (got {size})")
        self.settings = settings
        self.size = size
        self.idle: list[Worker] = []
        self.running = 0  # workers alive, idle or busy
        self.cond = threading.Condition()
        self.closed = False

    def _argv(self) -> list[str]:
        s = self.settings
        lim = s.sql_limits
        config = {
            "store": str(s.store.path),
            "url": s.url,
            "max_rows": s.max_rows,
            "sql_limits": {"seconds": lim.seconds, "rows": lim.rows, "memory": lim.memory, "threads": lim.threads},
        }
        return [sys.executable, "-m", "agent.worker", json.dumps(config)]

    def _spawn(self) -> Worker:
        root = str(Path(__file__).resolve().parent.parent)  # the package this server runs from
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        proc = subprocess.Popen(self._argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        return Worker(proc)

    def start(self) -> None:
        """Start one worker now (the server's first call need not wait for its imports)."""
        with self.cond:
            if self.running < self.size and not self.idle:
                self.idle.append(self._spawn())
                self.running += 1

    def _acquire(self) -> Worker:
        with self.cond:
            while True:
                if self.closed:
                    raise AgentError("the server is shutting down")
                while self.idle:
                    w = self.idle.pop()
                    if w.proc.poll() is None:
                        return w
                    w.kill()  # died while idle
                    self.running -= 1
                if self.running < self.size:
                    self.running += 1
                    break
                self.cond.wait()
        try:
            return self._spawn()
        except BaseException:
            self._lost()
            raise

    def _release(self, w: Worker) -> None:
        with self.cond:
            if self.closed:
                w.kill()
                self.running -= 1
            else:
                self.idle.append(w)
            self.cond.notify()

    def _lost(self) -> None:
        with self.cond:
            self.running -= 1
            self.cond.notify()

    def _boot(self, w: Worker) -> None:
        if w.ready:
            return
        line = w.read_line(BOOT_SECONDS)
        if line is None or json.loads(line) != {"ready": True}:
            raise WorkerFailed(f"the worker process did not start within {BOOT_SECONDS:g} s")
        w.ready = True

    def call(self, tool: str, args: dict[str, Any], seconds: float, ticket: Ticket | None = None) -> Any:
        """``tools.<tool>(settings, **args)`` in a worker, stopped after ``seconds`` of work."""
        if tool not in TOOLS:
            raise AgentError(f"no tool {tool!r}")
        ticket = ticket or Ticket()
        w = self._acquire()
        ticket.worker = w
        try:
            self._boot(w)
            if ticket.cancelled:
                raise AgentError("cancelled")
            assert w.proc.stdin is not None
            w.proc.stdin.write(json.dumps({"tool": tool, "args": args}).encode() + b"\n")
            w.proc.stdin.flush()
            line = w.read_line(seconds)
        except BaseException:
            w.kill()
            self._lost()
            raise
        if line is None:
            w.kill()
            self._lost()
            self.start()  # the next call finds a worker booted
            raise TimeLimitExceeded(
                f"{tool} took longer than the server's time limit of {seconds:g} s: it was stopped (its worker "
                "process killed, nothing of it kept). Ask a narrower question (one run, fewer ranks, a lower "
                "limit), or start the server with a higher --time-limit."
            )
        self._release(w)
        answer = json.loads(line)
        if "error" in answer:
            raise AgentError(answer["error"])
        return answer["ok"]

    def cancel(self, ticket: Ticket) -> None:
        """Stop a call in flight (the client cancelled it): its worker is killed, the call fails."""
        ticket.cancelled = True
        w = ticket.worker
        if w is not None and w.proc.poll() is None:
            w.proc.kill()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            idle, self.idle = self.idle, []
            self.running -= len(idle)
            self.cond.notify_all()
        for w in idle:
            w.kill()


# ---------------------------------------------------------------------------------------------
# the worker process
# ---------------------------------------------------------------------------------------------


def serve(settings: Settings, rfile: Any, wfile: Any) -> None:
    """Answer the calls read from ``rfile`` (JSON lines) on ``wfile`` until ``rfile`` closes."""
    from analyzer.errors import AnalyzerError
    from webapp.errors import WebappError

    def send(obj: Any) -> None:
        wfile.write(json.dumps(obj, default=str).encode() + b"\n")
        wfile.flush()

    send({"ready": True})
    for line in rfile:
        req = json.loads(line)
        try:
            if req["tool"] not in TOOLS:
                raise AgentError(f"no tool {req['tool']!r}")
            send({"ok": TOOLS[req["tool"]](settings, **req["args"])})
        except (AnalyzerError, WebappError, AgentError) as exc:
            send({"error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - a bug: the client sees what, the log where; the worker goes on
            traceback.print_exc(file=sys.stderr)
            send({"error": f"{req['tool']} failed: {type(exc).__name__}: {exc}"})


def main(argv: Sequence[str]) -> None:
    """``python -m agent.worker CONFIG`` (the server's Settings as JSON): serve on stdin / stdout
    (stdout kept for the protocol alone: print() and the libraries' output go to stderr)."""
    from analyzer.store import Limits, Store

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the server's terminal is the server's to handle
    (arg,) = argv
    config = json.loads(arg)
    settings = Settings(
        Store(config["store"]),
        url=config["url"],
        max_rows=int(config["max_rows"]),
        sql_limits=Limits(**config["sql_limits"]),
    )
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(settings, sys.stdin.buffer, out)


if __name__ == "__main__":
    main(sys.argv[1:])
