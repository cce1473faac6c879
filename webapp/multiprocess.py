"""Several server processes on one port: gunicorn (``analyze serve --workers N``, Unix only).

The app is built once in the parent (``create_app``: no store opened, no thread started), then
gunicorn forks ``workers`` processes of ``threads`` request threads each (its ``gthread`` worker)
that accept on one listening socket the parent bound (so port 0 works and the address is known
before the first fork). A worker opens the store, warms its caches and runs its warm-up thread
itself, after the fork: the processes share the store and nothing else. gunicorn restarts a
worker that dies; SIGTERM or SIGINT to the parent stops them all.
"""

from __future__ import annotations

import socket
from typing import Any

from gunicorn.app.base import BaseApplication


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: any free port), inheritable by the workers."""
    family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # answers go out at once (headers and body are separate writes; with Nagle the second
        # waits for the client's delayed ACK, ~40 ms); accepted connections inherit it
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(addr)
        sock.listen(2048)
        sock.set_inheritable(True)
    except BaseException:
        sock.close()
        raise
    return sock


class _Server(BaseApplication):  # type: ignore[misc]
    def __init__(self, wsgi: Any, options: dict[str, Any]):
        self.application = wsgi
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        return self.application


def run(wsgi: Any, sock: socket.socket, workers: int, threads: int, quiet: bool = True) -> None:
    """Serve ``wsgi`` on ``sock`` with ``workers`` gunicorn processes of ``threads`` threads until stopped."""
    _Server(
        wsgi,
        {
            "bind": [f"fd://{sock.fileno()}"],
            "workers": workers,
            "worker_class": "gthread",
            "threads": threads,
            "loglevel": "warning" if quiet else "info",
            "graceful_timeout": 5,
            # an idle kept-alive connection stays open as long as waitress keeps one (its
            # channel_timeout): with gunicorn's 2 s a client reusing the connection just as the
            # worker closed it gets a reset (seen once in 3 717 requests of bench_load.py)
            "keepalive": 120,
            "timeout": 600,  # a worker busy this long without a heartbeat is restarted
            "control_socket_disable": True,  # no shared socket file under $HOME
            "proc_name": "rankscope-serve",
        },
    ).run()
