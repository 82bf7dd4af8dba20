"""What a TubeMQ producer and consumer share: their identity, the master list with failover, authentication, and
the heartbeat thread.

Masters: the client talks to one master of its list at a time. A standby master answers StandbyException, and a
master that cannot be reached fails the call: the client moves on to the next one (around the list once), and
the caller re-registers there (a new master knows nothing of it).

Authentication: with a user name and password every master request carries a signature (Base64 of
HmacSHA1(password, userName + timestamp + nonce), URL-encoded); once the master hands out an authorized token it
is carried instead, until the master asks for a signature again (requireAuth). The visit token (anti-bypass) the
master hands out goes with every broker request.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import logging
import os
import random
import socket
import threading
import time
import urllib.parse
from typing import Any, Callable

from fastmq.client import parse_servers
from fastmq.io import NetworkError
from fastmq.tubemq._proto import broker_pb2, master_pb2
from fastmq.tubemq.errors import NoMasterError, StandbyError
from fastmq.tubemq.rpc_client import Address, RpcClient

log = logging.getLogger(__name__)

CLIENT_VERSION = "fastmq-0.1.0"
DEFAULT_MASTER_PORT = 8715
NO_TOKEN = -2          # the visit token sent before the master handed one out
_counter = itertools.count(1)


def local_address() -> str:
    """This host's IPv4 address as TubeMQ reports it (hostName, clientId, sentAddr)."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def make_client_id(prefix: str, kind: str) -> str:
    """As the Java client builds it: prefix_ip_pid_timestamp_counter_kind_version."""
    return (f"{prefix}_{local_address()}_{os.getpid()}_{int(time.time() * 1000)}_{next(_counter)}_{kind}_"
            f"{CLIENT_VERSION}")


def signature(user: str, password: str, timestamp: int, nonce: int) -> str:
    digest = hmac.new(password.encode(), f"{user}{timestamp}{nonce}".encode(), hashlib.sha1).digest()
    return urllib.parse.quote(base64.b64encode(digest).decode("ascii"), safe="")


class MasterSession:
    """The master list, the one in use, and the tokens the master handed out."""

    def __init__(self, masters: str, rpc_client: RpcClient, *, user: str | None = None,
                 password: str | None = None) -> None:
        self.masters: list[Address] = parse_servers(masters, DEFAULT_MASTER_PORT)
        self.rpc = rpc_client
        self.user = user
        self.password = password
        self._index = 0
        self.visit_token = NO_TOKEN
        self.auth_token: str | None = None
        self.require_auth = True
        self._broker_auth: tuple[Any, broker_pb2.AuthorizedInfo | None] = (None, None)

    @property
    def current(self) -> Address:
        return self.masters[self._index]

    def certificate(self) -> master_pb2.MasterCertificateInfo | None:
        if self.user is None:
            return None
        if self.auth_token and not self.require_auth:
            return master_pb2.MasterCertificateInfo(authorizedToken=self.auth_token)
        timestamp, nonce = int(time.time() * 1000), random.getrandbits(31)
        return master_pb2.MasterCertificateInfo(authInfo=master_pb2.AuthenticateInfo(
            userName=self.user, timestamp=timestamp, nonce=nonce, othParams="",
            signature=signature(self.user, self.password or "", timestamp, nonce)))

    def broker_auth(self) -> broker_pb2.AuthorizedInfo:
        """The tokens for broker requests (one message while they stay the same: every send carries it)."""
        tokens = (self.visit_token, self.auth_token)
        if self._broker_auth[0] != tokens:
            info = broker_pb2.AuthorizedInfo(visitAuthorizedToken=self.visit_token)
            if self.auth_token:
                info.authAuthorizedToken = self.auth_token
            self._broker_auth = (tokens, info)
            return info
        cached = self._broker_auth[1]
        assert cached is not None           # set with the tokens it was made for
        return cached

    def note_authorization(self, response: Any) -> None:
        """Keep the tokens a register or heartbeat response carries."""
        if response.HasField("authorizedInfo"):
            self.visit_token = response.authorizedInfo.visitAuthorizedToken
            if response.authorizedInfo.HasField("authAuthorizedToken"):
                self.auth_token = response.authorizedInfo.authAuthorizedToken
                self.require_auth = False
        if getattr(response, "requireAuth", False):
            self.require_auth = True

    def call(self, method: int, message: Any, response_class: type, *, failover: bool = True) -> Any:
        """The current master's answer. A standby or unreachable master: the next one, once around the list
        (then NoMasterError). `failover=False` raises at the first failure (heartbeats: the caller
        re-registers after a failover)."""
        errors = []
        for _ in range(len(self.masters)):
            address = self.current
            try:
                return self.rpc.call(address, method, message, response_class)
            except (StandbyError, NetworkError, ConnectionError, TimeoutError) as exc:
                errors.append(f"{address[0]}:{address[1]}: {exc}")
                self._index = (self._index + 1) % len(self.masters)
                if not failover:
                    raise
        raise NoMasterError("no active TubeMQ master: " + "; ".join(errors))


class Heartbeat:
    """A daemon thread calling beat() every `interval` seconds until stop(); beat_now() wakes it early.
    An exception from beat() is logged and the beating goes on."""

    def __init__(self, name: str, interval: float, beat: Callable[[], None]) -> None:
        self.interval = interval
        self._beat = beat
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def beat_now(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stopped.is_set():
                return
            try:
                self._beat()
            except Exception:
                log.exception("TubeMQ heartbeat failed")

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(10)
