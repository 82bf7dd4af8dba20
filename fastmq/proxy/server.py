"""Serving the proxy: uvicorn's server on uvloop, with the proxy's own HTTP/1.1 connections on httptools' parser
(connection.py says why), one event loop per process. Several
processes share one port through SO_REUSEPORT (the kernel spreads connections over them); each is a whole,
stateless proxy, as separate hosts would be.

Shutdown on SIGTERM or SIGINT: the listening socket closes, long polls answer at once (empty), requests in
flight finish (up to GRACEFUL_S), then the producer sends what it holds and Redis is closed.
"""
from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import signal
import socket
from typing import Any, Callable, Iterator

from fastmq.proxy.app import ProxyApp
from fastmq.proxy.backend import Backend
from fastmq.proxy.config import ProxyConfig
from fastmq.proxy.connection import HttpConnection

GRACEFUL_S = 10

_log = logging.getLogger(__name__)


class JsonLogFormatter(logging.Formatter):
    """Structured logs: one JSON object a line (time, level, logger, message, and the exception if any)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
                 "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter())
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler], force=True)


def listening_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(config: ProxyConfig, backend: Backend, host: str, port: int, *, log_level: str = "info") -> bool:
    """Run one proxy process until SIGTERM / SIGINT; False when it could not start (Redis or the broker did not
    answer: the log says which)."""
    import uvicorn

    app = ProxyApp(config, backend)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            app.closing = True          # long polls answer now instead of holding the shutdown up
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn raises a SIGTERM / SIGINT it caught once more after shutting down, so that the process dies
            # of it (exit 143 through fastmq's CLI, -15 in a spawned process, which --processes took for a
            # failure): the proxy has shut down gracefully by then, and ends with code 0.
            with super().capture_signals():
                try:
                    yield
                finally:
                    self._captured_signals.clear()

    # No X-Forwarded-* rewriting (the proxy reads no client address; uvicorn's middleware for it cost a call per
    # request) and no Server header.
    settings = uvicorn.Config(app, loop="uvloop", http=HttpConnection, lifespan="on", access_log=False,
                              log_level=log_level, timeout_graceful_shutdown=GRACEFUL_S, log_config=None,
                              proxy_headers=False, server_header=False)
    server = Server(settings)
    server.run(sockets=[listening_socket(host, port)])
    return server.started or app.closing        # a stop asked for while starting is no failure to start


def serve_processes(count: int, target: Callable[..., None], args: tuple[Any, ...]) -> int:
    """Run target(*args) in `count` processes (spawned: no threads of this one are inherited) until they end;
    SIGTERM / SIGINT here is passed on to them. Returns the worst exit code."""
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=target, args=args, name=f"fastmq-proxy-{n}") for n in range(count)]
    for process in processes:
        process.start()

    forwarded = []

    def forward(signum: int, frame: Any) -> None:
        forwarded.append(signum)
        for process in processes:
            if process.is_alive():
                process.terminate()

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for process in processes:
            process.join()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    codes = [process.exitcode or 0 for process in processes]
    if forwarded:       # a process still starting (no handler of its own yet) died of the SIGTERM, as asked
        codes = [0 if code == -signal.SIGTERM else code for code in codes]
    return max(abs(code) for code in codes)
