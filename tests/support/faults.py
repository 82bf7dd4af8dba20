"""A TCP proxy on 127.0.0.1 between clients and a server, with network faults switched on and off by tests.

cut_after(n): the connection that carries the next n client->server bytes is cut in the middle of that stream
(both sides closed), as a broken network would. delay(seconds): server->client bytes are held that long.
blackhole(): bytes are taken in both directions and dropped, the connections staying open (a peer that went
silent: only timeouts notice). refuse(): new connections are closed at once. disconnect_all(): every open
connection is closed now. heal() ends every fault. tls_context: the proxy terminates TLS for the clients (a TLS
front for a server that has none). tap(connection, to_server, data) is called with every chunk passed on, before
it is (a bench records what clients send with it). Every thread is bounded by stop().
"""
from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable

PUMP_POLL_S = 0.1


class FaultProxy:
    def __init__(self, upstream_port: int, tls_context: Any = None, upstream_host: str = "127.0.0.1",
                 tap: Callable[[int, bool, bytes], None] | None = None) -> None:
        self.upstream_host = upstream_host
        self.tap = tap
        self.upstream_port = upstream_port
        self.tls_context = tls_context
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(PUMP_POLL_S)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.cuts = 0
        self._cut_after: int | None = None
        self._delay = 0.0
        self._blackhole = False
        self._refuse = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._accept_loop, name="fault-proxy", daemon=True)
        self._accept.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut_after(self, client_bytes: int | None) -> None:
        with self._lock:
            self._cut_after = client_bytes

    def delay(self, seconds: float) -> None:
        self._delay = seconds

    def blackhole(self, on: bool = True) -> None:
        self._blackhole = on

    def refuse(self, refuse: bool = True) -> None:
        self._refuse = refuse

    def heal(self) -> None:
        self.cut_after(None)
        self.delay(0.0)
        self.blackhole(False)
        self.refuse(False)

    def disconnect_all(self) -> None:
        """Close every connection open now (their pumps end; new connections are served as before)."""
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            if self._refuse:
                client.close()
                continue
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(client, self.connections), name="fault-proxy-conn",
                                      daemon=True)
            self._threads = [known for known in self._threads if known.is_alive()] + [thread]
            thread.start()

    def _serve(self, client: socket.socket, number: int) -> None:
        try:
            if self.tls_context is not None:
                client.settimeout(5.0)
                client = self.tls_context.wrap_socket(client, server_side=True)
            upstream = socket.create_connection((self.upstream_host, self.upstream_port), timeout=5.0)
        except OSError:
            client.close()
            return
        with self._lock:
            self._sockets += [client, upstream]
        done = threading.Event()
        pumps = [threading.Thread(target=self._pump, args=(client, upstream, True, done, number), daemon=True),
                 threading.Thread(target=self._pump, args=(upstream, client, False, done, number), daemon=True)]
        for pump in pumps:
            pump.start()
        for pump in pumps:
            pump.join()
        with self._lock:
            self._sockets = [sock for sock in self._sockets if sock not in (client, upstream)]

    def _hold(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self._stop.is_set() and time.monotonic() < end:
            time.sleep(min(PUMP_POLL_S / 2, max(0.0, end - time.monotonic())))

    def _pump(self, source: socket.socket, sink: socket.socket, to_server: bool, done: threading.Event,
              number: int) -> None:
        try:
            source.settimeout(PUMP_POLL_S)      # raises when disconnect_all() closed it already
            while not done.is_set() and not self._stop.is_set():
                try:
                    data = source.recv(65536)
                except (TimeoutError, socket.timeout):
                    continue
                if not data:
                    break
                if self._blackhole:
                    continue
                if to_server:
                    with self._lock:
                        budget = self._cut_after
                        if budget is not None:
                            if len(data) >= budget:
                                self._cut_after = None
                                self.cuts += 1
                                sink.sendall(data[:budget])
                                break
                            self._cut_after = budget - len(data)
                elif self._delay:
                    self._hold(self._delay)
                if self.tap is not None:
                    self.tap(number, to_server, data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            done.set()
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def stop(self) -> None:
        self._stop.set()
        self.sock.close()
        self._accept.join(5)
        self.disconnect_all()
        for thread in self._threads:
            thread.join(5)
