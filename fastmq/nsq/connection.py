"""One connection to nsqd on the io engine: the adapter (framing, FIFO answers, heartbeats) and the handshake.

Handshake, as nsqd expects it: the magic "  V2" and IDENTIFY (feature_negotiation on) in one write; nsqd answers
with the negotiated settings as JSON. The upgrades it agreed to follow in nsqd's order, each confirmed by one more
OK that nsqd sends through the upgraded stream: TLS, then snappy or deflate. AUTH comes last when nsqd says
auth_required. Then the connection is READY.

Answers: nsqd answers PUB, MPUB, DPUB, SUB, IDENTIFY, AUTH and CLS in order, and nothing else (RDY, FIN, REQ,
TOUCH and NOP are silent on success), so the connection matches responses in FIFO order and those silent commands
leave with send_frame(). Frames that answer nothing: heartbeats (answered with NOP here), messages (to the owner's
on_push), the non-fatal E_FIN_FAILED / E_REQ_FAILED / E_TOUCH_FAILED (logged), and a fatal error while no request
waits (the connection is closed with it).
"""
from __future__ import annotations

import logging
import socket
import ssl
from dataclasses import dataclass, field
from typing import Any, Callable

from fastmq import __version__
from fastmq.errors import ProtocolError
from fastmq.io import AuthenticationError, DeflateStream, HandshakeStep, ProtocolAdapter, SnappyStream
from fastmq.io.adapter import AdapterConnection
from fastmq.json_document import json_object
from fastmq.nsq._native import codec
from fastmq.nsq.errors import NSQConfigurationError, for_frame

_log = logging.getLogger(__name__)

_NON_FATAL_PREFIXES = (b"E_FIN_FAILED", b"E_REQ_FAILED", b"E_TOUCH_FAILED")


@dataclass
class NSQSettings:
    """What a client tells nsqd in IDENTIFY, and how it connects (every field documents nsqd's own option)."""

    client_id: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    hostname: str = field(default_factory=socket.gethostname)
    user_agent: str = f"fastmq/{__version__}"
    heartbeat_interval_ms: int = 30000      # -1 off; nsqd closes a connection silent for twice this
    output_buffer_size: int = 16384         # bytes nsqd buffers before writing to us (-1 off)
    output_buffer_timeout_ms: int = 250     # the longest nsqd holds buffered output (-1 off)
    tls: ssl.SSLContext | None = None       # upgrade to TLS (tls_v1) with this context
    tls_server_hostname: str | None = None  # the name to check nsqd's certificate against (default its host)
    snappy: bool = False
    deflate: bool = False
    deflate_level: int = 6
    sample_rate: int = 0                    # 1..99: nsqd sends only that percentage of the messages
    msg_timeout_ms: int | None = None       # this connection's message timeout (nsqd's default otherwise)
    auth_secret: str | bytes | None = None  # sent with AUTH when nsqd asks for it
    extend_support: bool = False            # Youzan: receive ext headers; an ext topic takes only such
                                            # subscribers, other topics none. A consumer that finds its topic
                                            # through nsqlookupd follows the lookup's meta (extend_support) instead
    desired_tag: str | None = None          # Youzan: receive only messages with this tag
    ext_filter: dict[str, Any] | None = None  # Youzan: {"type": 1 exact | 2 regex | 3 glob | 4 multi, "inverse",
                                            # "filter_ext_key", "filter_data", "filter_data_list"}: the ext-header
                                            # messages to receive (nsqd finishes the others for the channel)
    connect_timeout_ms: float = 10000
    request_timeout_ms: float = 30000

    def __post_init__(self) -> None:
        if self.snappy and self.deflate:
            raise NSQConfigurationError("snappy and deflate cannot both be on (nsqd refuses the pair)")
        if not (self.heartbeat_interval_ms == -1 or 1000 <= self.heartbeat_interval_ms <= 60000):
            raise NSQConfigurationError(f"heartbeat_interval_ms is -1 or 1000..60000, got {self.heartbeat_interval_ms}")
        if not 0 <= self.sample_rate <= 99:
            raise NSQConfigurationError(f"sample_rate is 0..99, got {self.sample_rate}")
        if not 1 <= self.deflate_level <= 9:
            raise NSQConfigurationError(f"deflate_level is 1..9, got {self.deflate_level}")

    def identify_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "client_id": self.client_id, "hostname": self.hostname, "user_agent": self.user_agent,
            "feature_negotiation": True, "heartbeat_interval": self.heartbeat_interval_ms,
            "output_buffer_size": self.output_buffer_size, "output_buffer_timeout": self.output_buffer_timeout_ms,
            "tls_v1": self.tls is not None, "snappy": self.snappy, "deflate": self.deflate,
            "deflate_level": self.deflate_level, "sample_rate": self.sample_rate,
        }
        if self.msg_timeout_ms is not None:
            body["msg_timeout"] = self.msg_timeout_ms
        if self.extend_support:
            body["extend_support"] = True
        if self.desired_tag is not None:
            body["desired_tag"] = self.desired_tag
        if self.ext_filter is not None:
            body["ext_filter"] = self.ext_filter
        return body


def frame_error(frame: tuple[int, bytes]) -> BaseException | None:
    """The exception an answer frame carries (an error frame), or None for a response."""
    frame_type, data = frame
    if frame_type == codec.FRAME_ERROR:
        return for_frame(data)
    if frame_type != codec.FRAME_RESPONSE:
        return ProtocolError(f"nsqd answered a command with a frame of type {frame_type}")
    return None


def _answer_or_close(conn: AdapterConnection, frame: Any, error: BaseException | None) -> bytes | None:
    """A handshake answer's data; None when there is none (the connection closed, or is closed here because
    nsqd answered with an error)."""
    if error is not None:
        return None
    failure = frame_error(frame)
    if failure is not None:
        conn.close(failure)
        return None
    data: bytes = frame[1]
    return data


class IdentifyStep(HandshakeStep):
    """Magic + IDENTIFY, the upgrades nsqd agreed to, and AUTH (see the module docstring)."""

    def __init__(self, settings: NSQSettings, adapter: NSQAdapter, host: str) -> None:
        self.settings = settings
        self.adapter = adapter
        self.host = host

    def start(self, conn: AdapterConnection, done: Callable[[], None]) -> None:
        def identified(frame: Any, error: BaseException | None) -> None:
            data = _answer_or_close(conn, frame, error)
            if data is None:
                return
            # A ProtocolError raised here closes the connection with it, as any answer's does.
            negotiated = {} if data == codec.OK else json_object(data, "nsqd's IDENTIFY answer")
            self.adapter.negotiated = negotiated
            self._upgrade(conn, negotiated, done)

        conn.handshake_request([codec.MAGIC_V2, codec.identify(self.settings.identify_body())], identified)

    def _upgrade(self, conn: AdapterConnection, negotiated: dict[Any, Any], done: Callable[[], None]) -> None:
        settings = self.settings
        steps: list[Callable[[Callable[[], None]], None]] = []
        if negotiated.get("tls_v1"):
            if settings.tls is None:
                raise ProtocolError("nsqd turned TLS on though it was not asked for")
            steps.append(lambda then: conn.start_tls(
                settings.tls, server_side=False, server_hostname=settings.tls_server_hostname or self.host,
                on_done=lambda: conn.expect_frame(self._confirmed(conn, then))))
        def compressing(make_stream: Callable[[], Any]) -> Callable[[Callable[[], None]], None]:
            def step(then: Callable[[], None]) -> None:
                conn.start_compression(make_stream())
                conn.expect_frame(self._confirmed(conn, then))
            return step

        if negotiated.get("snappy"):
            steps.append(compressing(SnappyStream))
        if negotiated.get("deflate"):
            level = negotiated.get("deflate_level") or settings.deflate_level
            if type(level) is not int or not 1 <= level <= 9:
                raise ProtocolError(f"nsqd agreed to deflate at level {level!r}, not at 1 to 9")
            steps.append(compressing(lambda: DeflateStream(level)))
        if negotiated.get("auth_required"):
            steps.append(lambda then: self._auth(conn, then))

        def run(index: int) -> None:
            if index == len(steps):
                done()
            else:
                steps[index](lambda: run(index + 1))

        run(0)

    @staticmethod
    def _confirmed(conn: AdapterConnection, then: Callable[[], None]) -> Callable[[Any, BaseException | None], None]:
        def confirmed(frame: Any, error: BaseException | None) -> None:
            data = _answer_or_close(conn, frame, error)
            if data is None:
                return
            if data != codec.OK:
                conn.close(ProtocolError(f"nsqd confirmed an upgrade with {data[:60]!r}, not OK"))
            else:
                then()
        return confirmed

    def _auth(self, conn: AdapterConnection, then: Callable[[], None]) -> None:
        secret = self.settings.auth_secret
        if secret is None:
            conn.close(AuthenticationError("nsqd requires AUTH: give an auth_secret"))
            return

        def authed(frame: Any, error: BaseException | None) -> None:
            if error is not None:
                return
            failure = frame_error(frame)
            if failure is not None:
                auth_error = AuthenticationError(f"nsqd refused the auth secret: {failure}")
                auth_error.__cause__ = failure
                conn.close(auth_error)
                return
            self.adapter.identity = json_object(frame[1], "nsqd's AUTH answer")
            then()

        conn.handshake_request(codec.auth(secret), authed)


class NSQAdapter(ProtocolAdapter):
    """nsqd's framing and answer matching for one connection (see the module docstring)."""

    fifo = True

    def __init__(self, settings: NSQSettings) -> None:
        self.settings = settings
        self.host = ""
        self.negotiated: dict[str, Any] = {}     # IDENTIFY's answer
        self.identity: dict[str, Any] = {}       # AUTH's answer
        self._conn: Any = None

    def make_splitter(self) -> codec.MessageRunSplitter:
        return codec.MessageRunSplitter()

    def start_handshake(self, conn: AdapterConnection) -> None:
        self._conn = conn
        self.host = getattr(conn, "host", "")
        super().start_handshake(conn)

    def handshake_steps(self) -> tuple[HandshakeStep, ...]:
        return (IdentifyStep(self.settings, self, self.host),)

    def correlation_id(self, frame: tuple[int, bytes]) -> int | None:
        frame_type, data = frame
        if frame_type == codec.FRAME_MESSAGES:
            return None
        if frame_type == codec.FRAME_RESPONSE:
            return None if data == codec.HEARTBEAT else 0
        # An error answers the oldest command waiting for an answer, if any; FIN/REQ/TOUCH failures never do.
        if data.startswith(_NON_FATAL_PREFIXES) or self._conn is None or not self._conn.in_flight_count:
            return None
        # nsqd closes the connection after a fatal error: close it first, right after this answer is
        # delivered, so that nothing more is sent into it meanwhile.
        conn = self._conn
        conn.loop.call_soon(conn.close, for_frame(data))
        return 0

    def on_unsolicited(self, conn: AdapterConnection, frame: tuple[int, bytes]) -> None:
        frame_type, data = frame
        if frame_type == codec.FRAME_MESSAGES and conn.on_push is not None:
            conn.on_push(conn, frame)        # the hot path: a run of messages for the consumer
        elif frame_type == codec.FRAME_RESPONSE:
            conn.send_frame(codec.NOP)        # a heartbeat: nsqd closes connections that stay silent
        elif frame_type == codec.FRAME_ERROR:
            error = for_frame(data)
            if error.fatal:
                conn.close(error)
            else:
                _log.warning("nsqd at %s: %s", self.host, error)
        else:
            super().on_unsolicited(conn, frame)
