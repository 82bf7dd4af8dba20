"""Fixtures of the Kafka tests beyond the session-wide `tansu` (tests/conftest.py): fresh brokers behind a
fault-injecting proxy, behind a TLS terminator, and with authentication required."""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.tansu import RUNNING as _running, TansuBroker, start_tansu



class FaultProxy:
    """A TCP proxy on 127.0.0.1 between clients and a broker, with faults switched on and off by tests.

    cut_after(n): the next connection that carries n more client->broker bytes is cut in the middle of
    that stream (both sides closed), as a broken network would. delay(seconds): broker->client bytes
    are held that long. refuse(): new connections are closed at once. tls_context: the proxy terminates
    TLS for the clients (a TLS front for a broker that has none). Every thread is bounded by stop().
    """

    def __init__(self, upstream_port: int, tls_context: Any = None) -> None:
        self.upstream_port = upstream_port
        self.tls_context = tls_context
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.cuts = 0
        self._cut_after: int | None = None
        self._delay = 0.0
        self._refuse = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._accept_loop, name="fault-proxy", daemon=True)
        self._accept.start()

    def cut_after(self, client_bytes: int | None) -> None:
        with self._lock:
            self._cut_after = client_bytes

    def delay(self, seconds: float) -> None:
        self._delay = seconds

    def refuse(self, refuse: bool = True) -> None:
        self._refuse = refuse

    def heal(self) -> None:
        self.cut_after(None)
        self.delay(0.0)
        self.refuse(False)

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
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, client: socket.socket) -> None:
        try:
            if self.tls_context is not None:
                client.settimeout(5.0)
                client = self.tls_context.wrap_socket(client, server_side=True)
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5.0)
        except OSError:
            client.close()
            return
        with self._lock:
            self._sockets += [client, upstream]
        done = threading.Event()
        pumps = [threading.Thread(target=self._pump, args=(client, upstream, True, done), daemon=True),
                 threading.Thread(target=self._pump, args=(upstream, client, False, done), daemon=True)]
        for pump in pumps:
            pump.start()
        for pump in pumps:
            pump.join()

    def _pump(self, source: socket.socket, sink: socket.socket, to_broker: bool, done: threading.Event) -> None:
        try:
            # Inside the try: the other direction may have closed both sockets already.
            source.settimeout(0.1)
            while not done.is_set() and not self._stop.is_set():
                try:
                    data = source.recv(65536)
                except (TimeoutError, socket.timeout):
                    continue
                if not data:
                    break
                if to_broker:
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
                    end = time.monotonic() + self._delay
                    while not self._stop.is_set() and time.monotonic() < end:
                        time.sleep(min(0.05, max(0.0, end - time.monotonic())))
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
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.close()
                except OSError:
                    pass
        for thread in self._threads:
            thread.join(5)


@dataclass
class ProxiedBroker:
    """A Tansu broker that advertises a FaultProxy's address, so every client connection crosses it."""

    broker: TansuBroker
    proxy: FaultProxy

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.proxy.port}"


@pytest.fixture
def proxied_tansu():
    """A fresh Tansu reached only through a FaultProxy (.proxy): for fault injection tests."""
    yield from _proxied(None)


@pytest.fixture
def tls_tansu(pki):
    """A fresh Tansu behind a TLS-terminating proxy (Tansu 0.6 itself does not do TLS): the proxy holds
    the test PKI's server certificate for 127.0.0.1/localhost."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    yield from _proxied(context)


@pytest.fixture
def authenticating_tansu():
    """A fresh Tansu started with --authentication (SCRAM required)."""
    broker = start_tansu(extra_args=("--authentication",))
    _running.append(broker)
    try:
        yield broker
    finally:
        broker.stop()
        _running.remove(broker)


def _proxied(tls_context: Any):
    broker = None
    proxy = None
    try:
        # The proxy needs the broker's port and the broker the proxy's: reserve the proxy port first.
        proxy = FaultProxy(upstream_port=0, tls_context=tls_context)
        broker = start_tansu(advertised_port=proxy.port)
        proxy.upstream_port = broker.port
        _running.append(broker)
        yield ProxiedBroker(broker, proxy)
    finally:
        if proxy is not None:
            proxy.stop()
        if broker is not None:
            broker.stop()
            if broker in _running:
                _running.remove(broker)


@pytest.fixture(scope="module")
def kafka_broker(request):
    """The session's Tansu, or the embedded broker for tests parametrized by on_both_brokers
    (tests/support/brokers.py): anything with .bootstrap_servers."""
    return request.getfixturevalue("embedded_broker" if getattr(request, "param", "tansu") == "embedded"
                                   else "tansu")
