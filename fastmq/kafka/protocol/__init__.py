"""The Kafka wire protocol: message classes for every API fastmq speaks, and their encoders and decoders.

    from fastmq.kafka import protocol as kp

    request = kp.MetadataRequest(topics=[kp.MetadataRequest.MetadataRequestTopic(name="events")])
    frame = kp.encode_request(kp.ApiKey.METADATA, 12, correlation_id=7, client_id="me", body=request)
    sock.sendall(frame)                                # a WriteBuffer; no copy needed to send it
    ...
    correlation_id, response = kp.decode_response(kp.ApiKey.METADATA, 12, frame_without_size)

How it is built (one mechanism for every API and version):
- schema.py: a compact declarative notation for Kafka's message specifications; schemas_*.py hold the
  definitions (facts from Apache Kafka's message JSON files, versions 0 up to Kafka 4.1's).
- structs.py: one generated __slots__ class per struct, keyword-constructible, with the union of all
  versions' fields; message classes carry their nested struct classes as attributes.
- messages_stub.py: writes messages.pyi, the type stub of those generated classes (fields typed by wire type),
  from the same schemas; a test keeps the checked-in stub equal to what it writes.
- compiler.py: turns a (message, version) into flat per-struct programs (StructCodec) that the Cython
  interpreter in fastmq/kafka/_native/kafka_protocol.pyx runs, reading and writing instance slots directly.
- framing.py: whole frames (size prefix, headers, the ApiVersions special cases).
- versions.py: the supported version range of every API and the negotiation with a broker.

Bad input raises fastmq.errors.ProtocolError subclasses (TruncatedError, CorruptDataError) only; values that
cannot be encoded raise fastmq.kafka.errors.EncodeError naming the field.
"""
from fastmq._native.buffer import WriteBuffer
from fastmq.kafka._native.kafka_protocol import Struct
from fastmq.kafka.protocol import messages
from fastmq.kafka.protocol.framing import (
    SPLICE_MIN, RequestHeader, decode_request, decode_response, encode_request, encode_response,
    peek_correlation_id, request_header_version, response_header_version,
)
from fastmq.kafka.protocol.messages import *  # noqa: F401,F403  (ApiKey, APIS, body_codec and the message classes)
from fastmq.kafka.protocol.versions import (
    CLIENT_MAX_VERSIONS, SUPPORTED_VERSIONS, highest_common_version, negotiate_versions,
)

__all__ = [
    "CLIENT_MAX_VERSIONS", "RequestHeader", "SPLICE_MIN", "SUPPORTED_VERSIONS", "Struct", "WriteBuffer",
    "decode_request", "decode_response", "encode_request", "encode_response", "highest_common_version",
    "negotiate_versions", "peek_correlation_id", "request_header_version", "response_header_version",
]
__all__ += messages.__all__         # this form (not `messages.__all__ + [...]`) is one a type checker follows
