"""What a Kafka connection adds to the generic engine: framing, correlation ids and the handshake.

Handshake, on every new connection before it is READY:
  1. ApiVersions (v3, falling back to the broker's highest when it answers UNSUPPORTED_VERSION): the
     versions both sides support are recorded, and every later request uses the highest common one.
  2. With SASL: SaslHandshake (v1) naming the mechanism, then SaslAuthenticate exchanges driven by the
     mechanism's state machine (fastmq.io.sasl) until both sides are done.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable

import fastmq
from fastmq._native.frames import KafkaFrameSplitter
from fastmq.io import AuthenticationError, ProtocolAdapter
from fastmq.io.adapter import AdapterConnection
from fastmq.io.sasl import create_client
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp

_log = logging.getLogger(__name__)

API_VERSIONS_VERSION = 3
SASL_HANDSHAKE_VERSION = 1
UNANSWERED_REMEMBERED = 4096


class KafkaAdapter(ProtocolAdapter):
    """One per connection: it keeps the API versions negotiated with that broker."""

    def __init__(self, *, client_id: str | None, max_frame_size: int, sasl: dict[str, Any] | None = None,
                 fixed_versions: dict[int, int] | None = None) -> None:
        self.client_id = client_id
        self.max_frame_size = max_frame_size
        self.sasl = sasl
        self.versions: dict[int, int] = dict(fixed_versions or {})
        self._fixed = fixed_versions is not None
        # Recent requests sent expecting no response (see expect_no_response), oldest first, and as a set.
        self._unanswered: deque[int] = deque()
        self._unanswered_ids: set[int] = set()

    def make_splitter(self) -> KafkaFrameSplitter:
        return KafkaFrameSplitter(self.max_frame_size)

    def correlation_id(self, frame: Any) -> int | None:
        correlation_id = kp.peek_correlation_id(frame)
        if self._unanswered_ids and correlation_id in self._unanswered_ids:
            return None         # answers a request sent expecting no response: see expect_no_response
        return correlation_id

    def expect_no_response(self, correlation_id: int) -> None:
        """Remember a request sent expecting no response (acks=0 produce): some brokers (Tansu 0.6) answer
        those anyway, and such an answer must be dropped rather than break the connection."""
        self._unanswered.append(correlation_id)
        self._unanswered_ids.add(correlation_id)
        if len(self._unanswered) > UNANSWERED_REMEMBERED:
            self._unanswered_ids.discard(self._unanswered.popleft())

    def on_unsolicited(self, conn: AdapterConnection, frame: Any) -> None:
        """Only answers to requests sent expecting no response get here (correlation_id): drop them."""

    def version_for(self, api_key: int) -> int:
        """The version to use for an API on this connection."""
        version = self.versions.get(api_key)
        if version is None:
            name = kp.APIS[api_key].name if api_key in kp.APIS else api_key
            raise kerrors.UnsupportedVersionError(f"the broker does not support {name}")
        return version

    # ---- handshake ----------------------------------------------------------------------------------

    def start_handshake(self, conn: AdapterConnection) -> None:
        if self._fixed:
            self._authenticate(conn)
        else:
            self._api_versions(conn, API_VERSIONS_VERSION)

    def _exchange(self, conn: AdapterConnection, request: Any, version: int,
                  on_response: Callable[[Any], None]) -> None:
        correlation_id = conn.next_correlation_id()
        frame = kp.encode_request(request.API_KEY, version, correlation_id, self.client_id, request)

        def done(response_frame: Any, error: BaseException | None) -> None:
            if error is not None:
                return          # the connection is closing with that error already
            try:
                _, response = kp.decode_response(request.API_KEY, version, response_frame)
                on_response(response)
            except Exception as exc:  # any failure ends the handshake and closes this connection only
                conn.close(exc)

        conn.handshake_request(frame, done, correlation_id)

    def _api_versions(self, conn: AdapterConnection, version: int) -> None:
        request = kp.ApiVersionsRequest(client_software_name="fastmq",
                                        client_software_version=fastmq.__version__)

        def on_response(response: Any) -> None:
            if response.error_code == kerrors.UnsupportedVersionError.errno:
                ours = [k for k in response.api_keys if k.api_key == kp.ApiKey.API_VERSIONS]
                fallback = min(ours[0].max_version, version - 1) if ours else 0
                if fallback >= 0 and fallback < version:
                    self._api_versions(conn, fallback)
                    return
            if response.error_code:
                raise kerrors.for_code(response.error_code)("ApiVersions failed")
            self.versions = kp.negotiate_versions(response)
            self._authenticate(conn)

        self._exchange(conn, request, version, on_response)

    def _authenticate(self, conn: AdapterConnection) -> None:
        sasl = self.sasl
        if not sasl:
            conn.handshake_done()
            return
        mechanism = sasl["mechanism"]

        def on_handshake(response: Any) -> None:
            if response.error_code:
                raise kerrors.UnsupportedSaslMechanismError(
                    f"the broker does not offer SASL mechanism {mechanism}; it offers {response.mechanisms}")
            client = create_client(mechanism, sasl["username"], sasl["password"], use_saslprep=False)
            self._sasl_step(conn, mechanism, client, client.first_message())

        self._exchange(conn, kp.SaslHandshakeRequest(mechanism=mechanism), SASL_HANDSHAKE_VERSION, on_handshake)

    def _sasl_step(self, conn: AdapterConnection, mechanism: str, client: Any, message: bytes) -> None:
        version = self.versions.get(kp.ApiKey.SASL_AUTHENTICATE)
        if version is None:
            conn.close(kerrors.UnsupportedVersionError("the broker does not support SaslAuthenticate"))
            return

        def on_response(response: Any) -> None:
            if response.error_code:
                conn.close(AuthenticationError(
                    f"SASL {mechanism} authentication failed: "
                    f"{response.error_message or kerrors.for_code(response.error_code).__name__}"))
                return
            reply = client.process(response.auth_bytes)   # AuthenticationError when the server's proof fails
            if reply is None:
                conn.handshake_done()
            else:
                self._sasl_step(conn, mechanism, client, reply)

        self._exchange(conn, kp.SaslAuthenticateRequest(auth_bytes=message), version, on_response)
