"""The RocketMQ listeners (namesrv and broker alike): per-connection sessions, command decoding, dispatch to a
table of handlers, and answers matched by opaque.

Frames are cut by the RocketMQ frame splitter and decoded by fastmq.rocketmq's codec on the I/O thread. A handler
answers through its Request at once or later (a held PULL, a SEND waiting for its fsync) from any thread.
RocketMQ clients match answers by opaque, not by order, and send their heartbeats and offset updates on the
connection their long-polling pulls wait on: so every request leaves the in-order reply queue at once and its
answer is written whenever it is ready (a server push, fastmq.io's send_frame).

What is not a command (garbage, a truncated or oversized frame, a header of the wrong types) closes that
connection with a ProtocolError naming the problem; other connections are not disturbed. A well-formed command
with a bad field gets an error response (SYSTEM_ERROR, or the code the handler chose) and the connection stays;
an unknown request code gets REQUEST_CODE_NOT_SUPPORTED, as RocketMQ answers. A handler bug closes the
connection and is logged.
"""
from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any, Callable

from fastmq._native.frames import RocketMQFrameSplitter
from fastmq.broker.config import ListenerConfig
from fastmq.broker.stats import ConnectionInfo
from fastmq.errors import FastMQError, ProtocolError
from fastmq.io import Listener, Reply, ServerConnection, ServerHandler
from fastmq.io.errors import ConnectionClosedError
from fastmq.rocketmq._native.remoting import FLAG_ONEWAY, FLAG_RESPONSE, LANGUAGE_NAMES, decode_command, encode_frame
from fastmq.rocketmq.protocol import ResponseCode
from fastmq.store.message import pack_host

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.broker import Broker

log = logging.getLogger(__name__)

LANGUAGE_JAVA = 0
SERVER_VERSION = 453          # what our answers say they come from (a 4.9-era server)


class RequestError(FastMQError):
    """A well-formed command whose fields are wrong: answered with `code` and the message as remark."""

    def __init__(self, message: str, code: int = ResponseCode.SYSTEM_ERROR) -> None:
        super().__init__(message)
        self.code = code


class Session:
    __slots__ = ("info", "language", "version", "born_host")

    def __init__(self, info: ConnectionInfo, born_host: bytes | None = None) -> None:
        self.info = info
        self.language = "OTHER"
        self.version = 0
        self.born_host = born_host      # the peer's address as stored messages' BORNHOST (None: not IPv4)


class Request:
    """One command being handled. respond() answers it once, from any thread (nothing for a oneway request)."""

    __slots__ = ("listener", "conn", "session", "command", "fields", "_answered")

    def __init__(self, listener: RemotingListener, conn: ServerConnection, session: Session, command: Any) -> None:
        self.listener = listener
        self.conn = conn
        self.session = session
        self.command = command
        self.fields: dict[str, str] = command.ext_fields
        self._answered = False

    @property
    def code(self) -> int:
        code: int = self.command.code
        return code

    @property
    def body(self) -> bytes:
        return self.command.body or b""

    @property
    def broker(self) -> Broker:
        return self.listener.broker

    @property
    def peer(self) -> str:
        peer = self.conn.peer
        return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    # -- reading fields ---------------------------------------------------------------------------------------

    # `key`: the field's name on the wire when it differs from `name` (SEND_MESSAGE_V2's a..n); errors say `name`.

    def text(self, name: str, default: str | None = None, key: str | None = None) -> str:
        value = self.fields.get(key or name, default)
        if value is None:
            raise RequestError(f"the custom field <{name}> is null", ResponseCode.INVALID_PARAMETER)
        return value

    def integer(self, name: str, default: int | None = None, low: int = -2 ** 63, high: int = 2 ** 63 - 1,
                key: str | None = None) -> int:
        value = self.fields.get(key or name)
        if value is None:
            if default is None:
                raise RequestError(f"the custom field <{name}> is null", ResponseCode.INVALID_PARAMETER)
            return default
        try:
            number = int(value)
        except ValueError:
            raise RequestError(f"the custom field <{name}> is not a number: {value[:40]!r}",
                               ResponseCode.INVALID_PARAMETER) from None
        if not low <= number <= high:
            raise RequestError(f"the custom field <{name}> = {number} is out of range {low}..{high}",
                               ResponseCode.INVALID_PARAMETER)
        return number

    def boolean(self, name: str, default: bool = False) -> bool:
        value = self.fields.get(name)
        return default if value is None else value.lower() == "true"

    # -- answering --------------------------------------------------------------------------------------------

    def respond(self, code: int = ResponseCode.SUCCESS, fields: dict[str, Any] | None = None, body: Any = None,
                remark: str | None = None) -> None:
        if self._answered:
            raise RuntimeError("this request was already answered")
        self._answered = True
        if self.command.flag & FLAG_ONEWAY:
            return
        # In the request's serialize type: a client that sent the binary ROCKETMQ header reads one, and the
        # binary header costs both sides less than JSON (Apache answers in its own type, JSON by default).
        frame = encode_frame(code, self.command.opaque, fields, body, FLAG_RESPONSE, self.command.serialize_type,
                             LANGUAGE_JAVA, SERVER_VERSION, remark)
        self.listener.send(self.conn, frame)


Handler = Callable[[Request], None]


class RemotingListener(ServerHandler):
    """One listening socket speaking RocketMQ remoting, serving the commands of `handlers`."""

    def __init__(self, broker: Broker, listener: ListenerConfig, handlers: dict[int, Handler],
                 connection_lost: Callable[[ServerConnection], None] | None = None) -> None:
        self.broker = broker
        self.config = listener
        self.handlers = handlers
        self._connection_lost = connection_lost
        # requests of ours to clients awaiting their answer: (id(conn), opaque) -> (on_answer, its timeout timer)
        self._calls: dict[tuple[int, int], tuple[Callable[[Any], None], Any]] = {}
        self._opaques = itertools.count(1)
        config = broker.config
        context = listener.server_ssl_context()
        self.listener = Listener(broker.loop, lambda: RocketMQFrameSplitter(min(config.max_request_size, 16 << 20)),
                                 self, listener.host, listener.port, ssl_context=context,
                                 max_connections=config.max_connections,
                                 max_pending_replies=config.max_pending_replies,
                                 connections_max_idle_ms=config.connections_max_idle_ms)
        self.address = self.listener.address

    @property
    def advertised(self) -> str:
        host, port = self.config.advertised(self.address)
        return f"{host}:{port}"

    def close(self) -> None:
        self.listener.close()

    def send(self, conn: ServerConnection, frame: bytes) -> None:
        """Write an answer or a request of the server's own, from any thread; a closed connection drops it."""
        self.broker.loop.call_or_hand_over(self._send, conn, frame)

    def call_client(self, conn: ServerConnection, code: int, fields: dict[str, Any], body: Any,
                    on_answer: Callable[[Any], None], timeout: float) -> None:
        """Send a request to a client (loop thread); on_answer(its response command), or on_answer(None) when it
        did not answer within timeout seconds or its connection closed first."""
        opaque = next(self._opaques) & 0x7FFFFFFF
        key = (id(conn), opaque)
        timer = self.broker.loop.call_later(timeout, self._call_ended, key, None)
        self._calls[key] = (on_answer, timer)
        self._send(conn, encode_frame(code, opaque, fields, body, 0, 0, LANGUAGE_JAVA, SERVER_VERSION))

    def tell_client(self, conn: ServerConnection, code: int, fields: dict[str, Any], body: Any = None) -> None:
        """Send a oneway request to a client, from any thread (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE,
        RESET_CONSUMER_CLIENT_OFFSET): nothing comes back."""
        self.send(conn, encode_frame(code, next(self._opaques) & 0x7FFFFFFF, fields, body, FLAG_ONEWAY, 0,
                                     LANGUAGE_JAVA, SERVER_VERSION))

    def _call_ended(self, key: tuple[int, int], answer: Any) -> None:
        call = self._calls.pop(key, None)
        if call is not None:
            call[1].cancel()
            call[0](answer)

    @staticmethod
    def _send(conn: ServerConnection, frame: bytes) -> None:
        try:
            conn.send_answer(frame)
        except ConnectionClosedError:
            pass

    # -- ServerHandler ----------------------------------------------------------------------------------------

    def connection_made(self, conn: ServerConnection) -> None:
        peer = conn.peer
        info = self.broker.connections.opened(id(conn), f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple)
                                              else str(peer), f"{self.config.protocol}:{self.config.security_protocol}")
        # packed once: ipaddress's parsing was 6% of the broker's time per SEND_BATCH_MESSAGE
        conn.session = Session(info, pack_host((peer[0], peer[1]))
                               if isinstance(peer, tuple) and "." in str(peer[0]) else None)

    def connection_lost(self, conn: ServerConnection, error: BaseException) -> None:
        self.broker.connections.closed(id(conn))
        for key in [key for key in self._calls if key[0] == id(conn)]:
            self._call_ended(key, None)
        if self._connection_lost is not None:
            self._connection_lost(conn)

    def frame_received(self, conn: ServerConnection, frame: Any, reply: Reply) -> None:
        reply(None)      # answers travel by opaque (send_frame), in whatever order they are ready
        try:
            command = decode_command(frame)
        except (ValueError, FastMQError) as exc:
            raise ProtocolError(f"{conn}: not a RocketMQ remoting command: {exc}") from None
        if command.flag & FLAG_RESPONSE:
            # a client's answer to a request of ours (call_client); oneway ones (NOTIFY_CONSUMER_IDS_CHANGED) get none
            self._call_ended((id(conn), command.opaque), command)
            return
        session: Session = conn.session
        if session.info.software is None:
            session.language = LANGUAGE_NAMES.get(command.language, "OTHER")
            session.version = command.version
            session.info.software = f"{session.language} {command.version}"
        request = Request(self, conn, session, command)
        handler = self.handlers.get(command.code)
        if handler is None:
            request.respond(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                            remark=f"request code {command.code} is not supported")
            return
        try:
            handler(request)
        except RequestError as exc:
            if not request._answered:
                request.respond(exc.code, remark=str(exc))
