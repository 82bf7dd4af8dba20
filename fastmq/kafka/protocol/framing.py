"""Whole Kafka frames: size prefix, request/response header and body.

    request   int32 size | api_key int16 | api_version int16 | correlation_id int32 | client_id string16
              | (header v2, flexible versions: tagged fields) | body
    response  int32 size | correlation_id int32 | (header v1, flexible versions except ApiVersions:
              tagged fields) | body

Encoders append the frame, size prefix included, to a WriteBuffer (a new one unless `out` is given, so that
several requests can be batched into one send); the buffer exports its bytes without a copy
(memoryview(buf), buf.detach()). A buffer made with WriteBuffer(splice_min=SPLICE_MIN) references large
bytes and records values instead of copying them (a produce request's batches); it is then sent as
buf.parts(), one vectored write. Decoders take a frame without its size prefix, as the frame splitter hands
it over, and return Struct instances whose records fields are views into that frame.
"""
from __future__ import annotations

from typing import Any

from fastmq.kafka._native import kafka_protocol as _native
from fastmq._native.buffer import WriteBuffer
from fastmq.errors import ProtocolError
from fastmq.kafka.errors import UnsupportedRequestError, UnsupportedVersionError
from fastmq.kafka.protocol.compiler import compile_struct
from fastmq.kafka.protocol.messages import APIS, ApiKey, body_codec
from fastmq.kafka.protocol.schema import parse_struct
from fastmq.kafka.protocol.structs import make_struct_class

# Values from this size on are cheaper to send from where they are (one more iovec entry) than to copy.
SPLICE_MIN = 32 << 10

_HEADER_SCHEMA = parse_struct("RequestHeader", """
request_api_key: int16 0+
request_api_version: int16 0+
correlation_id: int32 0+
client_id: string 0+ nullable=0+
""")
RequestHeader = make_struct_class(_HEADER_SCHEMA, "RequestHeader", __name__)
"""The header of a request (the tagged fields of header v2 carry nothing fastmq uses)."""

# client_id keeps its int16 length even in header v2, so the header fields always use the classic encodings.
_HEADER_CODEC = compile_struct(_HEADER_SCHEMA, 1, flexible=False)


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible versions (tagged fields after client_id), else 1."""
    return 2 if APIS[api_key].is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions (tagged fields after the correlation id), else 0; ApiVersions always 0 (a
    client cannot know yet whether the broker speaks flexible versions)."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if APIS[api_key].is_flexible(api_version) else 0


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any,
                   out: WriteBuffer | None = None) -> WriteBuffer:
    """Appends a request frame (size prefix included) to out or to a new WriteBuffer, and returns that."""
    codec = body_codec(api_key, api_version, False)
    return _native.encode_request(codec, api_key, api_version, request_header_version(api_key, api_version) == 2,
                                  correlation_id, client_id, body, out)


def decode_request(frame: Any, allow_trailing_bytes: bool = False) -> tuple[Any, Any]:
    """(RequestHeader, body) of a request frame without its size prefix.

    UnsupportedRequestError (carrying api_key, api_version and correlation_id) if fastmq does not implement
    that API or version; ProtocolError subclasses for anything malformed. allow_trailing_bytes ignores bytes
    after the body, as Kafka's broker does (librdkafka sends three with some Metadata requests)."""
    api_key, api_version, correlation_id = _native.peek_request_header(frame)
    try:
        codec = body_codec(api_key, api_version, False)
    except UnsupportedVersionError as exc:
        raise UnsupportedRequestError(str(exc), api_key, api_version, correlation_id) from None
    return _native.decode_request(_HEADER_CODEC, request_header_version(api_key, api_version) == 2, codec, frame,
                                  allow_trailing_bytes)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any,
                    out: WriteBuffer | None = None) -> WriteBuffer:
    """Appends a response frame (size prefix included) to out or to a new WriteBuffer, and returns that."""
    codec = body_codec(api_key, api_version, True)
    return _native.encode_response(codec, response_header_version(api_key, api_version) == 1, correlation_id,
                                   body, out)


def decode_response(api_key: int, api_version: int, frame: Any) -> tuple[int, Any]:
    """(correlation_id, body) of a response frame without its size prefix.

    A broker answers an ApiVersions request of a version it does not know with a v0 response carrying
    UNSUPPORTED_VERSION (and its own version range); such an answer is decoded as v0, as Kafka's clients do."""
    codec = body_codec(api_key, api_version, True)
    header_v1 = response_header_version(api_key, api_version) == 1
    try:
        return _native.decode_response(codec, header_v1, frame)
    except ProtocolError:
        if api_key != ApiKey.API_VERSIONS or api_version == 0:
            raise
        try:
            correlation_id, body = _native.decode_response(body_codec(api_key, 0, True), False, frame)
        except ProtocolError:
            body = None
        if body is None or body.error_code == 0:
            raise
        return correlation_id, body


peek_correlation_id = _native.peek_correlation_id
