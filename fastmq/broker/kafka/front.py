"""The Kafka listeners: per-connection sessions, request decoding and dispatch to the handlers.

Every request is decoded on the broker's I/O thread (compiled codecs) and handed to the handler of its API with a
Request, through which the handler answers at once or later from any thread (acks=all after the flush, a held
Fetch when data arrives); responses leave in request order (fastmq.io.Reply).

What is not a well-formed request of an API and version this broker advertises closes that connection (Kafka does
the same): garbage, a size beyond max_request_size, an unknown API key, an unadvertised version. The one exception
is ApiVersions of a version newer than ours, answered with a v0 UNSUPPORTED_VERSION response listing our ranges so
that the client can retry with a version we speak. Nothing a client sends takes the broker down: a handler bug
closes that connection and is logged.

On a SASL listener a connection may only send ApiVersions, SaslHandshake and SaslAuthenticate until it has
authenticated. SaslHandshake v0 switches the connection to Kafka's old framing, where the next frames are raw SASL
tokens without request headers.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from fastmq._native.frames import KafkaFrameSplitter
from fastmq.broker.config import ListenerConfig
from fastmq.broker.stats import ConnectionInfo
from fastmq.errors import ProtocolError
from fastmq.io import Listener, Reply, ServerConnection, ServerHandler
from fastmq.io.errors import AuthenticationError
from fastmq.kafka import protocol as kp
from fastmq.kafka.errors import UnsupportedRequestError
from fastmq.kafka.protocol import ApiKey

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.broker import Broker
    from fastmq.broker.kafka.frontend import KafkaFrontEnd

log = logging.getLogger(__name__)

# The versions this broker answers: every API it implements completely, and no other (absent from ApiVersions).
BROKER_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 11),
    ApiKey.FETCH: (4, 17),
    ApiKey.LIST_OFFSETS: (1, 8),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
}
PRE_AUTHENTICATION_APIS = (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
UNSUPPORTED_VERSION = 35


class Session:
    """Per-connection state (ServerConnection.session)."""

    __slots__ = ("listener", "authenticated", "sasl", "sasl_raw", "principal", "info", "failed")

    def __init__(self, listener: ListenerConfig, info: ConnectionInfo) -> None:
        self.listener = listener
        self.authenticated = not listener.uses_sasl
        self.sasl: Any = None           # the SASL server exchange in progress
        self.sasl_raw = False           # after SaslHandshake v0: frames are raw SASL tokens
        self.principal: str | None = None
        self.info = info
        self.failed = False             # authentication failed: the next request closes the connection


class Request:
    """One request being handled; respond() answers it (once, from any thread). `front` is the broker's Kafka
    front end (its partition logs, transactions, fetch sessions), `broker` the core."""

    __slots__ = ("front", "listener", "conn", "session", "api_key", "version", "correlation_id", "client_id", "reply")

    def __init__(self, listener: KafkaListener, conn: ServerConnection, session: Session, header: Any,
                 reply: Reply) -> None:
        self.front = listener.front
        self.listener = listener
        self.conn = conn
        self.session = session
        self.api_key = header.request_api_key
        self.version = header.request_api_version
        self.correlation_id = header.correlation_id
        self.client_id = header.client_id
        self.reply = reply

    @property
    def broker(self) -> Broker:
        return self.front.broker

    def respond(self, body: Any) -> None:
        # Fetched record batches are referenced, not copied, into the frame (they are built for this answer).
        frame = kp.encode_response(self.api_key, self.version, self.correlation_id, body,
                                   kp.WriteBuffer(splice_min=kp.SPLICE_MIN))
        self.reply(frame.parts())

    def no_response(self) -> None:
        self.reply(None)

    @property
    def client_host(self) -> str:
        peer = self.conn.peer
        return "/" + str(peer[0] if isinstance(peer, tuple) else peer)


Handler = Callable[[Request, Any], None]


def handler_table() -> dict[int, Handler]:
    from fastmq.broker.kafka import admin, fetch, groups, metadata, offsets, produce, sasl, txn
    table: dict[int, Handler] = {}
    for module in (admin, fetch, groups, metadata, offsets, produce, sasl, txn):
        table.update(module.HANDLERS)
    missing = set(BROKER_VERSIONS) - set(table)
    if missing:
        raise RuntimeError(f"advertised APIs without a handler: {sorted(missing)}")
    return table


class KafkaListener(ServerHandler):
    """One listening socket speaking Kafka."""

    def __init__(self, front: KafkaFrontEnd, listener: ListenerConfig, handlers: dict[int, Handler]) -> None:
        self.front = front
        self.broker = broker = front.broker
        self.config = listener
        self.handlers = handlers
        config = broker.config
        context = listener.server_ssl_context()
        self.listener = Listener(broker.loop, lambda: KafkaFrameSplitter(config.max_request_size), self,
                                 listener.host, listener.port, ssl_context=context,
                                 max_connections=config.max_connections,
                                 max_pending_replies=config.max_pending_replies,
                                 connections_max_idle_ms=config.connections_max_idle_ms)
        self.address = self.listener.address

    @property
    def advertised(self) -> tuple[str, int]:
        """What Metadata and FindCoordinator tell the clients of this listener."""
        return self.config.advertised(self.address)

    def close(self) -> None:
        self.listener.close()

    # -- ServerHandler ----------------------------------------------------------------------------------------

    def connection_made(self, conn: ServerConnection) -> None:
        peer = conn.peer
        info = self.broker.connections.opened(id(conn), f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple)
                                              else str(peer), self.config.security_protocol)
        conn.session = Session(self.config, info)

    def connection_lost(self, conn: ServerConnection, error: BaseException) -> None:
        self.broker.connections.closed(id(conn))
        self.front.fetch_hold.connection_lost(conn)

    def frame_received(self, conn: ServerConnection, frame: Any, reply: Reply) -> None:
        session: Session = conn.session
        if session.sasl_raw:
            self._raw_sasl_token(conn, session, frame, reply)
            return
        if session.failed:
            raise ProtocolError(f"{conn}: request after a failed authentication")
        try:
            # Bytes past the body are ignored, as Kafka does (librdkafka sends some with Metadata v9+).
            header, body = kp.decode_request(frame, allow_trailing_bytes=True)
        except UnsupportedRequestError as exc:
            if exc.api_key == ApiKey.API_VERSIONS:
                self._unsupported_api_versions(exc.correlation_id, reply)
                return
            raise
        api_key = header.request_api_key
        versions = BROKER_VERSIONS.get(api_key)
        if versions is None or not versions[0] <= header.request_api_version <= versions[1]:
            if api_key == ApiKey.API_VERSIONS:
                self._unsupported_api_versions(header.correlation_id, reply)
                return
            raise ProtocolError(f"{conn}: {kp.APIS[api_key].name} v{header.request_api_version} is not served "
                                f"here (ApiVersions lists what is)")
        if not session.authenticated and api_key not in PRE_AUTHENTICATION_APIS:
            raise ProtocolError(f"{conn}: {kp.APIS[api_key].name} before SASL authentication")
        if header.client_id and session.info.client_id is None:
            session.info.client_id = header.client_id
        self.handlers[api_key](Request(self, conn, session, header, reply), body)

    def _unsupported_api_versions(self, correlation_id: int, reply: Reply) -> None:
        body = kp.ApiVersionsResponse(error_code=UNSUPPORTED_VERSION, api_keys=api_version_entries())
        reply(kp.encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body))

    def _raw_sasl_token(self, conn: ServerConnection, session: Session, frame: Any, reply: Reply) -> None:
        try:
            challenge = session.sasl.process(bytes(frame))
        except AuthenticationError as exc:
            raise ProtocolError(f"{conn}: SASL authentication failed: {exc}") from None
        if session.sasl.complete:
            session.authenticated = True
            session.sasl_raw = False
            session.principal = session.info.principal = session.sasl.username
            session.sasl = None
        challenge = challenge or b""
        reply([len(challenge).to_bytes(4, "big"), challenge])


def api_version_entries() -> list[Any]:
    return [kp.ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in sorted(BROKER_VERSIONS.items())]
