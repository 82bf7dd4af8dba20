"""The embedded broker's nsqd: NSQ's TCP protocol V2 (vanilla and Youzan's partition/trace commands) on the core.

Each connection starts with the magic "  V2" (anything else: E_BAD_PROTOCOL and close), then commands as
fastmq.nsq._native.codec.parse_command reads them. Answers: PUB, MPUB, DPUB, PUB_TRACE, MPUB_TRACE, SUB*, IDENTIFY,
AUTH and CLS get one (in order); RDY, FIN, REQ, TOUCH and NOP none, unless they fail. Fatal errors close the
connection after their error frame, as nsqd does. Messages and heartbeats are pushed with send_frame.

Topics are created on first use with the broker's default partition count; PUB without a partition writes
partition 0 (Youzan's default partition). An ordered topic (topic config nsq.ordered=true, set by nsqd HTTP's
/topic/create?orderedmulti=true) takes PUB only with a partition (else E_BAD_PARTITION) and SUB_ORDERED only (else
E_SUB_ORDER_IS_MUST, as Youzan's nsqd). An ext topic (topic config nsq.ext=true: /topic/create?extend=true, or
INTERNAL_CREATE_TOPIC's third argument) is the only kind PUB_EXT writes to (else E_EXT_NOT_SUPPORT), and the only
kind where dispatch tags and ext filters apply; as Youzan's nsqd, only clients that IDENTIFY'd with
extend_support subscribe to it (else E_SUB_EXTEND_NEED), and only the others subscribe to other topics (else
E_SUB_EXTEND_FORBIDDON). With an auth server (fastmq.broker.nsq.auth) every publish and subscribe
command is checked against the connection's AUTH answer. IDENTIFY answers with feature negotiation: snappy or deflate when asked,
TLS when asked and the listener has a certificate, then the upgrades in nsqd's order (TLS, then compression), each
confirmed by an OK through the upgraded stream; heartbeats are sent every heartbeat_interval, and a connection that
sent nothing for two intervals is closed (nsqd's read deadline: a client answers heartbeats with NOP).
"""
from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from fastmq.broker.nsq.auth import AuthState, common_name
from fastmq.broker.nsq.channels import DEFER_PROPERTY, EXT_PROPERTY, MAX_DEFER_MS, Channel, Subscriber
from fastmq.broker.nsq.filters import MAX_TAG_LEN, FilterError, build_filter
from fastmq.broker.errors import TopicError
from fastmq.errors import ProtocolError
from fastmq.io import DeflateStream, Listener, Reply, ServerConnection, ServerHandler, SnappyStream
from fastmq.io.tls import create_server_context
from fastmq.nsq._native import codec

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.config import ListenerConfig
    from fastmq.broker.nsq.frontend import NSQFrontEnd

_log = logging.getLogger(__name__)

MAX_BODY = 5 * 1024 * 1024       # nsqd's --max-body-size default
DEFAULT_HEARTBEAT_MS = 30000
DEFAULT_MSG_TIMEOUT_MS = 60000
MAX_RDY = 2500


class NSQError(Exception):
    """An error answer: code (E_...), text, and whether the connection closes after it."""

    def __init__(self, code: str, text: str, fatal: bool = True) -> None:
        super().__init__(f"{code} {text}")
        self.code, self.text, self.fatal = code, text, fatal


class _AskAuthServer(Exception):
    """A command needs the auth server's (new) answer first: it runs again once the answer is in."""


class CommandSplitter:
    """Cuts the client's byte stream into commands (the magic first): the FrameSplitter interface of fastmq.io."""

    def __init__(self, max_body: int = MAX_BODY) -> None:
        self._buffer = bytearray()
        self._chunk = bytearray()
        self._magic = False
        self._max_body = max_body

    def feed(self, data: Any) -> None:
        self._buffer += data

    def writable(self, min_size: int = 65536) -> memoryview:
        if len(self._chunk) < min_size:
            self._chunk = bytearray(min_size)
        return memoryview(self._chunk)

    def commit(self, n: int) -> None:
        self._buffer += memoryview(self._chunk)[:n]

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def take_buffered(self) -> bytes:
        data = bytes(self._buffer)
        self._buffer.clear()
        return data

    def next_frame(self) -> Any:
        buffer = self._buffer
        if not self._magic:
            if len(buffer) < 4:
                return None
            magic = bytes(buffer[:4])
            del buffer[:4]
            self._magic = True
            return (b"MAGIC", [magic], None)
        if not buffer:
            return None
        parsed = codec.parse_command(bytes(buffer) if len(buffer) < 4096 else memoryview(buffer), self._max_body)
        if parsed is None:
            return None
        name, params, body, used = parsed
        del buffer[:used]
        return (name, params, body)


class Session:
    """One client connection's state."""

    def __init__(self) -> None:
        self.identified = False
        self.heartbeat_ms = DEFAULT_HEARTBEAT_MS
        self.msg_timeout_ms = DEFAULT_MSG_TIMEOUT_MS
        self.heartbeat_timer: Any = None
        self.last_command = 0.0            # loop time of the last command received
        self.channel: Any = None
        self.subscriber: Subscriber | None = None
        self.closing = False
        self.extend_support = False        # Youzan: ext headers go with the messages
        self.desired_tag = ""              # Youzan: the dispatch tag this consumer takes
        self.ext_filter: Any = None        # Youzan: which PUB_EXT messages it takes (filters.build_filter)
        self.tls = False
        self.auth_secret: str | None = None
        self.auth: AuthState | None = None
        self.auth_answered = False
        self.upgrade: Any = None           # the stream upgrades IDENTIFY agreed to, run once its answer is queued


def response(data: bytes) -> bytes:
    return codec.encode_frame(codec.FRAME_RESPONSE, data)


def _int(raw: bytes, what: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise NSQError("E_INVALID", f"cannot read {what} {raw[:20]!r}") from None


def _close_after_error(conn: ServerConnection, error: BaseException) -> None:
    # The error frame is queued (answers here are immediate): write it before closing, as nsqd does.
    conn.flush()
    conn.close(error)


class NSQDListener(ServerHandler):
    """One listening socket speaking nsqd's TCP protocol."""

    def __init__(self, front: NSQFrontEnd, config: ListenerConfig) -> None:
        self.front = front
        broker = front.broker
        # TLS is offered in IDENTIFY (nsqd's tls_v1) when the listener has a certificate; client certificates
        # are asked for as the listener's ssl_client_auth says (a verified one's common name goes to AUTH).
        self.tls = (create_server_context(ssl_certfile=config.ssl_certfile, ssl_keyfile=config.ssl_keyfile,
                                          ssl_password=config.ssl_password, ssl_cafile=config.ssl_cafile,
                                          ssl_client_auth=config.ssl_client_auth) if config.ssl_certfile else None)
        self.listener = Listener(broker.loop, CommandSplitter, self, config.host, config.port,
                                 max_connections=broker.config.max_connections)
        self.address = self.listener.address

    def close(self) -> None:
        self.listener.close()

    # ---- ServerHandler -------------------------------------------------------------------------------

    def connection_made(self, conn: ServerConnection) -> None:
        conn.session = Session()

    def connection_lost(self, conn: ServerConnection, error: BaseException) -> None:
        session: Session | None = getattr(conn, "session", None)
        if session is None:
            return
        if session.heartbeat_timer is not None:
            session.heartbeat_timer.cancel()
        if session.channel is not None and session.subscriber is not None:
            session.channel.unsubscribe(session.subscriber)
            session.channel.dispatch()

    def frame_received(self, conn: ServerConnection, frame: Any, reply: Reply) -> None:
        name, params, body = frame
        session: Session = conn.session
        session.last_command = conn.loop.time()
        try:
            answer = self._command(conn, session, name, params, body)
        except _AskAuthServer:
            # Nothing more is read until this command has its answer, so commands keep their order.
            conn.pause_reading()
            self.front.ask_auth_server(
                session.auth_secret or "", conn.peer[0], session.tls, common_name(conn.peer_certificate()),
                lambda state, error: self._auth_answered(conn, frame, reply, state, error))
            return
        except NSQError as exc:
            reply(codec.encode_frame(codec.FRAME_ERROR, f"{exc.code} {exc.text}".encode()))
            if exc.fatal:
                conn.loop.call_soon(_close_after_error, conn, ProtocolError(str(exc)))
            return
        reply(None if answer is None else response(answer))
        if session.upgrade is not None:
            upgrade, session.upgrade = session.upgrade, None
            upgrade()

    def _auth_answered(self, conn: ServerConnection, frame: Any, reply: Reply, state: AuthState | None,
                       error: Exception | None) -> None:
        if conn.closed:
            return
        if state is None:
            # The auth server's trouble is not told to the client (as nsqd).
            _log.warning("AUTH of %s failed: %s", conn, error)
            reply(codec.encode_frame(codec.FRAME_ERROR, b"E_AUTH_FAILED AUTH failed"))
            conn.loop.call_soon(_close_after_error, conn, ProtocolError("E_AUTH_FAILED"))
            return
        conn.session.auth = state
        self.frame_received(conn, frame, reply)

    def _check_auth(self, session: Session, command: str, topic: str, channel: str = "") -> None:
        if not self.front.auth_addresses:
            return
        if session.auth is None or not session.auth.authorizations:
            raise NSQError("E_AUTH_FIRST", f"AUTH required before {command}")
        if session.auth.expired:
            raise _AskAuthServer()
        if not session.auth.allows(topic, channel):
            raise NSQError("E_UNAUTHORIZED", f"AUTH failed for {command} on {topic!r} {channel!r}")

    # ---- commands ------------------------------------------------------------------------------------

    def _command(self, conn: ServerConnection, session: Session, name: bytes, params: list[Any], body: Any) -> Any:
        if name == b"MAGIC":
            if params[0] != codec.MAGIC_V2:
                raise NSQError("E_BAD_PROTOCOL", f"unsupported protocol version {params[0]!r}")
            return None
        handler = _COMMANDS.get(name)
        if handler is None:
            raise NSQError("E_INVALID", f"invalid command {name[:30]!r}")
        return handler(self, conn, session, params, body)

    def _identify(self, conn: ServerConnection, session: Session, params: list[Any], body: bytes) -> bytes:
        try:
            settings = json.loads(body)
        except ValueError:
            raise NSQError("E_BAD_BODY", "IDENTIFY failed to decode JSON body") from None
        if not isinstance(settings, dict):
            raise NSQError("E_BAD_BODY", "IDENTIFY body must be a JSON object")
        heartbeat = int(settings.get("heartbeat_interval") or 0)
        if heartbeat == -1:
            session.heartbeat_ms = 0
        elif heartbeat:
            if not 1000 <= heartbeat <= 60000:
                raise NSQError("E_BAD_BODY", f"IDENTIFY heartbeat interval ({heartbeat}) is invalid")
            session.heartbeat_ms = heartbeat
        msg_timeout = int(settings.get("msg_timeout") or 0)
        if msg_timeout:
            if not 1000 <= msg_timeout <= 900000:
                raise NSQError("E_BAD_BODY", f"IDENTIFY msg timeout ({msg_timeout}) is invalid")
            session.msg_timeout_ms = msg_timeout
        tag = settings.get("desired_tag") or ""
        if not isinstance(tag, str) or len(tag) > MAX_TAG_LEN:
            raise NSQError("E_BAD_BODY", f"IDENTIFY desired_tag must be a string of at most {MAX_TAG_LEN} chars")
        try:
            session.ext_filter = build_filter(settings.get("ext_filter"))
        except FilterError as exc:
            raise NSQError("E_BAD_BODY", f"IDENTIFY {exc}") from None
        session.identified = True
        session.desired_tag = tag
        session.extend_support = bool(settings.get("extend_support"))
        self._schedule_heartbeat(conn, session)
        if not settings.get("feature_negotiation"):
            return codec.OK
        tls = bool(settings.get("tls_v1")) and self.tls is not None
        snappy, deflate = bool(settings.get("snappy")), bool(settings.get("deflate"))
        if snappy and deflate:
            raise NSQError("E_IDENTIFY_FAILED", "cannot enable both deflate and snappy compression")
        level = max(1, min(int(settings.get("deflate_level") or 6), 6))
        session.upgrade = lambda: self._upgrade(conn, tls, snappy, deflate, level)
        return json.dumps({
            "max_rdy_count": MAX_RDY, "version": "1.3.0", "max_msg_timeout": 900000,
            "msg_timeout": session.msg_timeout_ms, "tls_v1": tls, "deflate": deflate, "deflate_level": level,
            "max_deflate_level": 6, "snappy": snappy, "sample_rate": 0,
            "auth_required": bool(self.front.auth_addresses),
            "output_buffer_size": 16384, "output_buffer_timeout": 250}).encode()

    def _upgrade(self, conn: ServerConnection, tls: bool, snappy: bool, deflate: bool, level: int) -> None:
        # nsqd's order: TLS, then compression; each confirmed by an OK sent through the upgraded stream.
        def compress() -> None:
            if snappy or deflate:
                conn.start_compression(SnappyStream() if snappy else DeflateStream(level))
                conn.send_frame(response(codec.OK))

        def tls_done() -> None:
            conn.send_frame(response(codec.OK))
            compress()

        if tls:
            assert self.tls is not None         # IDENTIFY agrees to TLS only when the listener offers it
            conn.session.tls = True
            conn.start_tls(self.tls, server_side=True, on_done=tls_done)
        else:
            compress()

    def _schedule_heartbeat(self, conn: ServerConnection, session: Session) -> None:
        if session.heartbeat_timer is not None:
            session.heartbeat_timer.cancel()
            session.heartbeat_timer = None
        if session.heartbeat_ms:
            session.heartbeat_timer = conn.loop.call_later(session.heartbeat_ms / 1000.0, self._heartbeat, conn,
                                                           session)

    def _heartbeat(self, conn: ServerConnection, session: Session) -> None:
        session.heartbeat_timer = None
        if conn.closed:
            return
        if conn.loop.time() - session.last_command > 2 * session.heartbeat_ms / 1000.0:
            conn.close(ProtocolError(f"{conn} sent nothing for two heartbeat intervals "
                                     f"({session.heartbeat_ms} ms each)"))
            return
        conn.send_frame(response(codec.HEARTBEAT))
        self._schedule_heartbeat(conn, session)

    def _topic(self, raw: bytes) -> str:
        if not codec.is_valid_name(raw):
            raise NSQError("E_BAD_TOPIC", f"topic name {raw[:70]!r} is not valid")
        return raw.decode()

    def _partition(self, topic: str, params: list[bytes], index: int) -> int:
        partition = _int(params[index], "partition") if len(params) > index else None
        try:
            return self.front.partition_to_publish(topic, partition)
        except ValueError as exc:        # the front end's BadPartition (frontend.py imports this module)
            raise NSQError("E_BAD_PARTITION", str(exc)) from None

    def _check_sizes(self, command: str, messages: list[Any]) -> None:
        # nsqd's --max-msg-size is broker-wide: the broker's message size limit plays its part.
        limit = self.front.broker.config.max_message_bytes
        for message in messages:
            if len(message) > limit:
                raise NSQError("E_BAD_MESSAGE", f"{command} message too big {len(message)} > {limit}")

    def _pub(self, conn: ServerConnection, session: Session, params: list[Any], body: bytes) -> bytes:
        if not params:
            raise NSQError("E_INVALID", "PUB insufficient number of parameters")
        topic = self._topic(params[0])
        self._check_auth(session, "PUB", topic)
        if not body:
            raise NSQError("E_BAD_MESSAGE", "PUB invalid message body size 0")
        self._check_sizes("PUB", [body])
        self.front.append(topic, self._partition(topic, params, 1), [body])
        return codec.OK

    def _mpub(self, conn: ServerConnection, session: Session, params: list[bytes], body: bytes, *,
              traced: bool = False) -> bytes:
        command = "MPUB_TRACE" if traced else "MPUB"
        if len(params) < (2 if traced else 1):
            raise NSQError("E_INVALID", f"{command} insufficient number of parameters")
        topic = self._topic(params[0])
        self._check_auth(session, command, topic)
        partition = self._partition(topic, params, 1)
        try:
            messages = codec.split_multi(body, traced)
        except ProtocolError as exc:
            raise NSQError("E_BAD_BODY", f"{command} {exc}") from None
        if traced:
            # (trace id, body) pairs: Youzan's reply carries the first message's id and no trace id.
            messages = [message for _, message in messages]
        if any(not message for message in messages):
            raise NSQError("E_BAD_MESSAGE", f"{command} invalid message body size 0")
        self._check_sizes(command, messages)
        result = self.front.append(topic, partition, messages)
        if not traced:
            return codec.OK
        return codec.encode_trace_reply(result.queue_offset, 0, result.commitlog_offset,
                                        sum(len(message) for message in messages))

    def _mpub_trace(self, conn: ServerConnection, session: Session, params: list[bytes], body: bytes) -> bytes:
        return self._mpub(conn, session, params, body, traced=True)

    def _dpub(self, conn: ServerConnection, session: Session, params: list[Any], body: bytes) -> bytes:
        if len(params) < 2:
            raise NSQError("E_INVALID", "DPUB insufficient number of parameters")
        topic = self._topic(params[0])
        self._check_auth(session, "DPUB", topic)
        delay = _int(params[1], "defer time")
        if not 0 <= delay <= MAX_DEFER_MS:
            raise NSQError("E_INVALID", f"DPUB timeout {delay} out of range 0-{MAX_DEFER_MS}")
        if not body:
            raise NSQError("E_BAD_MESSAGE", "DPUB invalid message body size 0")
        self.front.append(topic, 0, [body], {DEFER_PROPERTY: str(int(time.time() * 1000) + delay)})
        return codec.OK

    def _pub_trace(self, conn: ServerConnection, session: Session, params: list[Any], body: bytes) -> bytes:
        if len(params) < 2:
            raise NSQError("E_INVALID", "PUB_TRACE insufficient number of parameters")
        topic = self._topic(params[0])
        self._check_auth(session, "PUB_TRACE", topic)
        partition = self._partition(topic, params, 1)
        if len(body) <= 8:
            raise NSQError("E_BAD_MESSAGE", "PUB_TRACE body needs a trace id and a message")
        trace_id = int.from_bytes(body[:8], "big")
        result = self.front.append(topic, partition, [body[8:]])
        return codec.encode_trace_reply(result.queue_offset, trace_id, result.commitlog_offset, len(body) - 8)

    def _pub_ext(self, conn: ServerConnection, session: Session, params: list[Any], body: bytes) -> bytes:
        if len(params) < 2:
            raise NSQError("E_INVALID", "PUB_EXT insufficient number of parameters")
        topic = self._topic(params[0])
        self._check_auth(session, "PUB_EXT", topic)
        partition = self._partition(topic, params, 1)
        size = int.from_bytes(body[:2], "big") if len(body) >= 2 else -1
        if size < 0 or len(body) < 2 + size:
            raise NSQError("E_BAD_BODY", "PUB_EXT body shorter than its header")
        header, message = body[2:2 + size], body[2 + size:]
        if not message:
            raise NSQError("E_BAD_MESSAGE", "PUB_EXT invalid message body size 0")
        try:
            fields = json.loads(header) if header else {}
            trace = fields.get("##trace_id") if isinstance(fields, dict) else None
            trace_id = int(trace) if trace is not None else None
        except (ValueError, TypeError):
            raise NSQError("E_INVALID_JSON_HEADER", "PUB_EXT header is not a JSON object with a numeric "
                           "##trace_id") from None
        if not isinstance(fields, dict):
            raise NSQError("E_INVALID_JSON_HEADER", "PUB_EXT header is not a JSON object")
        if not self.front.is_ext(self.front.topic(topic)):
            raise NSQError("E_EXT_NOT_SUPPORT", f"ext content not supported in topic {topic}", fatal=False)
        result = self.front.append(topic, partition, [message], {EXT_PROPERTY: header.decode()} if header else None)
        if trace_id is None:
            return codec.OK
        return codec.encode_trace_reply(result.queue_offset, trace_id, result.commitlog_offset, len(message))

    def _sub_advanced(self, conn: ServerConnection, session: Session, params: list[Any], body: Any) -> bytes:
        if len(params) < 3:
            raise NSQError("E_INVALID", "SUB_ADVANCED needs topic, channel and partition")
        answer = self._sub(conn, session, params[:3], body, advanced=True)
        if len(params) > 3:
            kind, _, value = params[3].partition(b":")
            topic, partition = params[0].decode(), _int(params[2], "partition")
            number = _int(value, "offset")
            if kind in (b"msgcount", b"virtual_queue"):
                offset = number
            elif kind == b"timestamp":
                offset = self.front.broker.store.get_offset_by_time(topic, partition, number * 1000)
            else:
                raise NSQError("E_INVALID", f"SUB_ADVANCED offset type {kind[:20]!r} is not supported")
            session.channel.seek(partition, offset)
        return answer

    def _sub(self, conn: ServerConnection, session: Session, params: list[Any], body: Any, *,
             ordered: bool = False, advanced: bool = False) -> bytes:
        if session.channel is not None:
            raise NSQError("E_INVALID", "cannot SUB twice")
        if len(params) < 2:
            raise NSQError("E_INVALID", "SUB insufficient number of parameters")
        topic = self._topic(params[0])
        if not codec.is_valid_name(params[1]):
            raise NSQError("E_BAD_CHANNEL", f"channel name {params[1][:70]!r} is not valid")
        self._check_auth(session, "SUB", topic, params[1].decode())
        found = self.front.topic(topic)
        if not ordered and self.front.is_ordered(found):
            raise NSQError("E_SUB_ORDER_IS_MUST", "this topic is configured only allow ordered sub")
        ext_topic = self.front.is_ext(found)
        if ext_topic and not session.extend_support:
            raise NSQError("E_SUB_EXTEND_NEED", "this topic is extended and should identify as extend support.")
        if not ext_topic and session.extend_support:
            raise NSQError("E_SUB_EXTEND_FORBIDDON",
                           "this topic is not extended and should not identify as extend support.")
        partition = None
        if len(params) > 2 or ordered:
            if len(params) < 3:
                raise NSQError("E_INVALID", "SUB_ORDERED needs a partition")
            partition = self._partition(topic, params, 2)
        channel = self.front.channel(topic, params[1].decode())
        flags = (codec.WITH_OFFSET if ordered or advanced else 0) | (codec.WITH_EXT if session.extend_support else 0)
        # A tag or a filter on a topic without ext headers is dropped, as Youzan's nsqd does.
        subscriber = Subscriber(conn.send_frame, partition, ordered, session.msg_timeout_ms / 1000.0, flags,
                                session.desired_tag if ext_topic else "", session.ext_filter if ext_topic else None)
        channel.subscribe(subscriber)
        session.channel, session.subscriber = channel, subscriber
        return codec.OK

    def _sub_ordered(self, conn: ServerConnection, session: Session, params: list[Any], body: Any) -> bytes:
        return self._sub(conn, session, params, body, ordered=True)

    def _subscription(self, session: Session, what: str) -> tuple[Any, Subscriber]:
        if session.channel is None or session.subscriber is None:
            raise NSQError("E_INVALID", f"cannot {what} in current state")
        return session.channel, session.subscriber

    def _rdy(self, conn: ServerConnection, session: Session, params: list[Any], body: Any) -> None:
        channel, subscriber = self._subscription(session, "RDY")
        count = _int(params[0], "RDY count") if params else 1
        if not 0 <= count <= MAX_RDY:
            raise NSQError("E_INVALID", f"RDY count {count} out of range 0-{MAX_RDY}")
        subscriber.rdy = count
        channel.dispatch()

    def _answer_message(self, session: Session, what: str, params: list[Any], answer: Callable[..., None],
                        *args: Any) -> None:
        # FIN / REQ / TOUCH: a message id this connection does not hold in flight is a non-fatal failure.
        channel, subscriber = self._subscription(session, what)
        try:
            answer(channel, subscriber, params[0], *args)
        except KeyError:
            raise NSQError(f"E_{what}_FAILED", f"{what} {params[0]!r} failed", fatal=False) from None
        channel.dispatch()

    def _fin(self, conn: ServerConnection, session: Session, params: list[Any], body: Any) -> None:
        self._answer_message(session, "FIN", params, Channel.finish)

    def _req(self, conn: ServerConnection, session: Session, params: list[Any], body: Any) -> None:
        if len(params) < 2:
            raise NSQError("E_INVALID", "REQ insufficient number of parameters")
        delay = _int(params[1], "timeout")
        self._answer_message(session, "REQ", params, Channel.requeue, max(0, min(delay, MAX_DEFER_MS)))

    def _touch(self, conn: ServerConnection, session: Session, params: list[Any], body: Any) -> None:
        self._answer_message(session, "TOUCH", params, Channel.touch)

    def _internal_create_topic(self, conn: ServerConnection, session: Session, params: list[Any], body: Any) -> bytes:
        # Youzan's INTERNAL_CREATE_TOPIC topic partition [ext]: creates the topic with that partition (and those
        # below it), an ext topic when the third argument is true; a topic that exists stays as it is.
        if len(params) < 2:
            raise NSQError("E_INVALID", "CREATE_TOPIC insufficient number of parameters")
        topic = self._topic(params[0])
        partition = _int(params[1], "partition")
        if partition < 0:
            raise NSQError("E_BAD_PARTITION", "partition should not less than 0")
        ext = params[2].lower() if len(params) > 2 else b"false"
        if ext not in (b"true", b"t", b"1", b"false", b"f", b"0"):
            raise NSQError("E_BAD_EXT", f"topic ext is not valid: {params[2][:20]!r}")
        self._check_auth(session, "CREATE_TOPIC", topic)
        try:
            self.front.create_topic(topic, partition + 1, ext=ext in (b"true", b"t", b"1"))
        except TopicError as exc:
            raise NSQError("E_CREATE_TOPIC_FAILED", f"CREATE_TOPIC {topic} failed: {exc}", fatal=False) from None
        return codec.OK

    def _nop(self, conn: ServerConnection, session: Session, params: list[Any], body: Any) -> None:
        return None

    def _cls(self, conn: ServerConnection, session: Session, params: list[Any], body: Any) -> bytes:
        if session.subscriber is not None:
            session.subscriber.rdy = 0
        session.closing = True
        return codec.CLOSE_WAIT

    def _auth(self, conn: ServerConnection, session: Session, params: list[bytes], body: Any) -> bytes:
        if session.auth_answered:
            raise NSQError("E_INVALID", "AUTH already set")
        if session.channel is not None:
            raise NSQError("E_INVALID", "cannot AUTH in current state")
        if not body:
            raise NSQError("E_BAD_BODY", "AUTH invalid body size 0")
        if not self.front.auth_addresses:
            raise NSQError("E_AUTH_DISABLED", "AUTH disabled")
        if session.auth is None:
            session.auth_secret = bytes(body).decode("utf-8", "replace")
            raise _AskAuthServer()
        session.auth_answered = True
        if not session.auth.authorizations:
            raise NSQError("E_UNAUTHORIZED", "AUTH no authorizations found")
        return session.auth.answer()


_COMMANDS = {
    b"IDENTIFY": NSQDListener._identify, b"PUB": NSQDListener._pub, b"MPUB": NSQDListener._mpub,
    b"DPUB": NSQDListener._dpub, b"PUB_TRACE": NSQDListener._pub_trace, b"PUB_EXT": NSQDListener._pub_ext,
    b"MPUB_TRACE": NSQDListener._mpub_trace,
    b"SUB": NSQDListener._sub, b"SUB_ADVANCED": NSQDListener._sub_advanced,
    b"SUB_ORDERED": NSQDListener._sub_ordered, b"RDY": NSQDListener._rdy, b"FIN": NSQDListener._fin,
    b"REQ": NSQDListener._req, b"TOUCH": NSQDListener._touch, b"NOP": NSQDListener._nop, b"CLS": NSQDListener._cls,
    b"AUTH": NSQDListener._auth, b"INTERNAL_CREATE_TOPIC": NSQDListener._internal_create_topic,
}
